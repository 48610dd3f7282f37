// The unpaginated contact list, written item by item as the store yields rows, so memory stays flat
// however many contacts there are. Writing goes only as fast as the client reads; a client that stops
// reading altogether is cut off after a while. express-openapi-validator only sees bodies sent with
// res.json, so each streamed contact is checked here against the Contact schema compiled from openapi.yaml.
import type { Response } from 'express';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { Logger } from 'pino';
import type { ListedContact } from '../store/contacts.ts';
import { toContact } from './contact.ts';

export type ContactStream = (res: Response, records: AsyncIterable<ListedContact>) => Promise<void>;

/** Rows written between two turns of the event loop: small enough that no other request waits long. */
const ROWS_PER_TURN = 200;

export interface StreamOptions {
  /** How long a write may wait for the client to read before the response is cut off; 0 waits forever. */
  stallTimeoutMs: number;
  logger: Logger;
}

export function contactStream(validateContact: ValidateFunction, { stallTimeoutMs, logger }: StreamOptions): ContactStream {
  return async (res, records) => {
    // The head is written with the first row, not before: until then a failed query (an unknown
    // `after` id, say) can still become an ordinary error response.
    const head = () => res.status(200).type('application/json').write('{"object":"list","has_more":false,"data":[');
    let count = 0;
    for await (const record of records) {
      const contact = toContact(record);
      if (!validateContact(contact)) {
        throw new Error(`contact ${record.id} does not match the Contact schema: ${JSON.stringify(validateContact.errors)}`);
      }
      if (count === 0) head();
      const flushed = res.write((count === 0 ? '' : ',') + JSON.stringify(contact));
      count++;
      if (!flushed && !(await drained(res, stallTimeoutMs))) {
        logger.warn({ reqId: res.locals.reqId, written: count, stallTimeoutMs }, 'the client stopped reading the contact list; cutting it off');
        res.destroy();
      } else if (count % ROWS_PER_TURN === 0) await yieldToEventLoop();
      if (res.destroyed) return; // the client went away, or was sent away; leaving the loop ends the reads
    }
    if (count === 0) head();
    res.end(']}');
  };
}

/** Resolves true once the client has read what was written (or is gone), false if not within `timeoutMs` (if not 0). */
function drained(res: Response, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const finish = (inTime: boolean) => {
      clearTimeout(timer);
      res.off('drain', onDrain);
      res.off('close', onDrain);
      resolve(inTime);
    };
    const onDrain = () => finish(true);
    const timer = timeoutMs > 0 ? setTimeout(() => finish(false), timeoutMs) : undefined;
    res.on('drain', onDrain);
    res.on('close', onDrain);
  });
}
