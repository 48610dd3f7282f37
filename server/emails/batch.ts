// A batch's emails, judged one by one. express-openapi-validator's request check would refuse a whole
// batch for one bad email, but permissive mode must send the good ones, so `batchTriage` runs just
// ahead of that check: it holds each email to the contract's own BatchEmail schema (compiled from
// openapi.yaml; the whole EmailBatch first, as one check of the batch costs a third of a hundred checks
// of one email) and hands on only the emails that pass, which the request check then sees as usual.
// In strict mode, or when no email passes, the first refusal refuses the request. What is not an
// array of 1 to 100 emails, or has a bad header, is left for the request check to refuse as a whole.
// `composeBatch`, called by the operation's handler once the key is known, holds the emails left to
// the rules no schema can state (composeEmail), in the same two modes.
import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { RequestHandler } from 'express';
import type { Schemas } from '../api.ts';
import { operationsOf, resolveRef, type OpenApiDocument } from '../contract.ts';
import { ApiError, describeSchemaErrors, invalid } from '../http/errors.ts';
import type { EmailRecord } from '../store/emails.ts';
import { composeEmail, type FindTemplate, type OutgoingEmail } from './compose.ts';

type BatchMode = 'strict' | 'permissive';

export interface TriagedBatch {
  mode: BatchMode;
  /** The body as it came, which an idempotency key's fingerprint covers. */
  given: unknown[];
  /** For each email handed on, its index in the batch as it came. */
  indices: number[];
  /** The emails set aside, in permissive mode. */
  errors: Schemas['BatchItemError'][];
  /** Why the whole batch is refused, said once auth has judged the key (server/http/heldRefusal.ts). */
  refusal?: ApiError;
}

/** `validateBatch` and `validateEmail` check EmailBatch and BatchEmail, with the same rules. */
export function batchTriage(spec: OpenApiDocument, validateBatch: ValidateFunction, validateEmail: ValidateFunction): RequestHandler {
  const batch = resolveRef(spec, { $ref: '#/components/schemas/EmailBatch' });
  const modes: string[] = resolveRef(spec, { $ref: '#/components/parameters/BatchValidation' }).schema.enum;
  const path = operationsOf(spec).find(({ operation }) => operation.operationId === 'sendBatchEmails')!.path;

  return (req, res, next) => {
    if (req.method !== 'POST' || req.path !== path) return next();
    const items: unknown = req.body;
    const mode = req.get('x-batch-validation') ?? 'strict';
    if (!Array.isArray(items) || items.length < batch.minItems || items.length > batch.maxItems || !modes.includes(mode)) return next();
    const triaged: TriagedBatch = { mode: mode as BatchMode, given: items, indices: [...items.keys()], errors: [] };
    res.locals.batch = triaged;
    if (validateBatch(items)) return next();
    const kept: unknown[] = [];
    triaged.indices = [];
    for (const [index, item] of (items as unknown[]).entries()) {
      if (validateEmail(item)) {
        kept.push(item);
        triaged.indices.push(index);
      } else {
        triaged.errors.push({ index, message: describeSchemaErrors(validateEmail.errors!) });
      }
    }
    // The request check refuses the batch as it came; this refusal, naming the email, is the one said.
    const [first] = triaged.errors;
    if (mode === 'strict' || kept.length === 0) triaged.refusal = invalid(`emails[${first!.index}]: ${first!.message}`);
    else req.body = kept;
    next();
  };
}

/** The triaged batch's emails, composed: those to store, and in permissive mode every one refused, in the batch's order. */
export async function composeBatch(emails: OutgoingEmail[], triaged: TriagedBatch, findTemplate: FindTemplate, now: Date): Promise<{ accepted: EmailRecord[]; errors: Schemas['BatchItemError'][] }> {
  const accepted: EmailRecord[] = [];
  const errors = [...triaged.errors];
  for (const [at, email] of emails.entries()) {
    const index = triaged.indices[at]!;
    const composed = await composeEmail(email, findTemplate, now);
    if (typeof composed !== 'string') accepted.push(composed);
    else if (triaged.mode === 'strict') throw invalid(`emails[${index}]: ${composed}`);
    else errors.push({ index, message: composed });
  }
  return { accepted, errors: errors.sort((a, b) => a.index - b.index) };
}
