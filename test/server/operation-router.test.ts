// Routing by operationId: the server does not start with an operation of the contract unanswered.
import type { RequestHandler } from 'express';
import { describe, expect, it } from 'vitest';
import { loadSpec } from '../../server/contract.ts';
import { operationRouter } from '../../server/http/operationRouter.ts';

const spec = loadSpec();
const answer: RequestHandler = (_req, res) => void res.end();
const pathOperations = Object.values(spec.paths as Record<string, Record<string, { operationId?: string }>>).flatMap((item) => Object.values(item).flatMap((op) => op?.operationId ?? []));

describe('operationRouter', () => {
  it('takes a handler for every operation under paths, and asks none for the webhooks the server posts', () => {
    expect(pathOperations).toEqual(expect.arrayContaining(['sendEmail', 'getBroadcast', 'getHealth']));
    expect(pathOperations).not.toContain('emailSentEvent');
    expect(() => operationRouter(spec, Object.fromEntries(pathOperations.map((id) => [id, answer])))).not.toThrow();
  });

  it('refuses to start with an operation unanswered, naming it', () => {
    const handlers = Object.fromEntries(pathOperations.filter((id) => id !== 'getBroadcast' && id !== 'getHealth').map((id) => [id, answer]));
    expect(() => operationRouter(spec, handlers)).toThrow('no handler for getBroadcast, getHealth');
  });
});
