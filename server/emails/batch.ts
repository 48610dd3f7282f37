// Batch validation, ahead of express-openapi-validator's request check. That check would reject a whole
// batch for one bad email, but permissive mode must send the good ones. So the batch is checked here
// against the contract's own EmailBatch schema (compiled from openapi.yaml) and, only if that fails,
// email by email against BatchEmail, to tell the bad ones apart (one check of the whole batch costs
// a third of a hundred checks of one email). Every email is then held to the rules no schema can state
// (composeEmail). In strict mode the first bad email rejects the request; in permissive mode the bad
// ones are set aside with their index and the request goes on with only the good ones, which then pass
// the validator's check of the whole request as usual. What is not an array of 1 to 100 emails, or has
// a bad header, is left for the validator to refuse as a whole.
import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { RequestHandler } from 'express';
import type { Schemas } from '../api.ts';
import type { OpenApiDocument } from '../contract.ts';
import { resolveRef } from '../contract.ts';
import { describeSchemaErrors, invalid } from '../http/errors.ts';
import type { EmailRecord } from '../store/emails.ts';
import type { Store } from '../store/index.ts';
import { composeEmail, memoized, type OutgoingEmail } from './compose.ts';

export interface TriagedBatch {
  mode: 'strict' | 'permissive';
  accepted: EmailRecord[];
  errors: Schemas['BatchItemError'][];
}

/** `validateBatch` and `validateEmail` check EmailBatch and BatchEmail, with the same rules. */
export function batchValidation(spec: OpenApiDocument, store: Store, validateBatch: ValidateFunction, validateEmail: ValidateFunction): RequestHandler {
  const batch = resolveRef(spec, { $ref: '#/components/schemas/EmailBatch' });
  const modes: string[] = resolveRef(spec, { $ref: '#/components/parameters/BatchValidation' }).schema.enum;

  return async (req, res, next) => {
    if (req.openapi?.schema?.operationId !== 'sendBatchEmails') return next();
    const items: unknown = req.body;
    const mode = req.get('x-batch-validation') ?? 'strict';
    if (!Array.isArray(items) || items.length < batch.minItems || items.length > batch.maxItems || !modes.includes(mode)) return next();

    const findTemplate = memoized((id) => store.templates.find(id));
    const now = new Date();
    const triaged: TriagedBatch = { mode: mode as TriagedBatch['mode'], accepted: [], errors: [] };
    const kept: unknown[] = [];
    const allValid = validateBatch(items);
    for (const [index, item] of items.entries()) {
      const composed = allValid || validateEmail(item) ? await composeEmail(item as OutgoingEmail, findTemplate, now) : describeSchemaErrors(validateEmail.errors!);
      if (typeof composed === 'string') {
        if (mode === 'strict') throw invalid(`emails[${index}]: ${composed}`);
        triaged.errors.push({ index, message: composed });
      } else {
        triaged.accepted.push(composed);
        kept.push(item);
      }
    }
    res.locals.batch = triaged;
    // Nothing left to send: the answer is already known, and an empty batch would not pass the contract.
    if (kept.length === 0) return void res.json({ data: [], errors: triaged.errors });
    req.body = kept;
    next();
  };
}
