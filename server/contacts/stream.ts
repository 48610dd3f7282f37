// The unpaginated contact list, written item by item as the database cursor yields rows, so memory stays
// flat however many contacts there are. express-openapi-validator only sees bodies sent with res.json,
// so each streamed contact is checked here against the Contact schema compiled from openapi.yaml.
import type { Response } from 'express';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { ListedContact } from '../store/contacts.ts';
import { toContact } from './contact.ts';

export type ContactStream = (res: Response, records: AsyncIterable<ListedContact>) => Promise<void>;

/** Rows written between two turns of the event loop: small enough that no other request waits long. */
const ROWS_PER_TURN = 200;

export function contactStream(validateContact: ValidateFunction): ContactStream {
  return async (res, records) => {
    // The head is written with the first row, not before: until then a failed cursor (an unknown
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
      if (!flushed) await drainOrClose(res);
      else if (count % ROWS_PER_TURN === 0) await yieldToEventLoop();
      if (res.destroyed) return; // the client went away; leaving the loop closes the cursor
    }
    if (count === 0) head();
    res.end(']}');
  };
}

function drainOrClose(res: Response): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
