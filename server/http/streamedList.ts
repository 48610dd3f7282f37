// A list asked for without `limit` is the whole list, however long: it is written as it is read. The
// store reads rows in keyset chunks and lets each go once handed on; items go out in writes of a few
// kilobytes, each waiting for the client to take the one before. So memory holds a chunk and a write
// whatever the table's size, and a client that reads nothing for `stallTimeoutMs` is cut off. Between
// turns of a few milliseconds the writer gives the event loop back, so that other requests are served
// meanwhile. express-openapi-validator checks only bodies sent with res.json: here the list's envelope
// and every item are checked against the list's schema, compiled from the contract.
import type { Response } from 'express';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { Logger } from 'pino';
import type { Schemas } from '../api.ts';

/** The contract's list schemas: `{object: "list", has_more, data: [...]}`. */
export type ListName = { [Name in keyof Schemas]: Schemas[Name] extends { object: 'list'; has_more: boolean; data: unknown[] } ? Name : never }[keyof Schemas];
export type ItemOf<List extends ListName> = Schemas[List]['data'][number];

/** Writes the rows as the whole list, each made an item; rejects, before anything is written, if the first read fails. */
export type ListStream<Row> = (res: Response, rows: AsyncIterable<Row>) => Promise<void>;

export interface StreamOptions {
  /** How long a write may wait for the client to read before the response is cut off; 0 waits forever. */
  stallTimeoutMs: number;
  /** Hears of clients cut off. */
  logger?: Logger;
}

export interface StreamedLists {
  /** The writer of `list`, one of the contract's list schemas, whose items `toItem` makes from rows. */
  of<List extends ListName, Row>(list: List, toItem: (row: Row) => ItemOf<List>): ListStream<Row>;
}

/** How long the writer runs before it lets other callbacks in. */
const TURN_MS = 5;
/** Items gathered into one write: fewer, larger writes than one an item, and still small. */
const WRITE_CHARS = 16 * 1024;
/** The envelope of every whole list: it is never more than one page, so `has_more` is false. */
const OPENING = '{"object":"list","has_more":false,"data":[';

/** Writers checked against `compile`'s schemas (server/contract.ts's schemaCompiler). */
export function streamedLists(compile: (pointer: string) => ValidateFunction, options: StreamOptions): StreamedLists {
  return {
    of: (list, toItem) => {
      const checkList = compile(`/components/schemas/${list}`);
      if (!checkList(JSON.parse(`${OPENING}]}`))) throw new Error(`the contract's ${list} is not a list this writer can write: ${JSON.stringify(checkList.errors)}`);
      return listStream(list, compile(`/components/schemas/${list}/properties/data/items`), toItem, options);
    },
  };
}

/** The writer of one list, whose items `checkItem` checks. */
function listStream<Row>(list: string, checkItem: ValidateFunction, toItem: (row: Row) => unknown, { stallTimeoutMs, logger }: StreamOptions): ListStream<Row> {
  return async (res, rows) => {
    let count = 0;
    let pending = OPENING;
    let turnStarted = performance.now();
    // The status goes with the first write, not before: until then a failed read (an unknown `after` id,
    // a contact that is not there) can still become an ordinary error response.
    /** Writes what is pending; false once the response is gone (the client left, or was cut off). */
    const flush = async (): Promise<boolean> => {
      // Gone while the rows were read: nothing will drain, and its close has been heard already.
      if (res.destroyed) return false;
      if (!res.headersSent) res.status(200).type('application/json');
      const flushed = res.write(pending);
      pending = '';
      // A drain may come within this turn (the socket took the write at once): the turn's clock runs on.
      if (!flushed) {
        if (!(await drained(res, stallTimeoutMs))) {
          logger?.warn({ reqId: res.locals.reqId, list, written: count, stallTimeoutMs }, 'the client stopped reading the list; cutting it off');
          res.destroy();
        }
      }
      return !res.destroyed;
    };
    for await (const row of rows) {
      const item = toItem(row);
      if (!checkItem(item)) throw new Error(`an item of the ${list} does not match the contract: ${JSON.stringify(checkItem.errors)}`);
      pending += (count === 0 ? '' : ',') + JSON.stringify(item);
      count++;
      // Leaving the loop ends the reads.
      if (pending.length >= WRITE_CHARS && !(await flush())) return;
      if (performance.now() - turnStarted >= TURN_MS) {
        await yieldToEventLoop();
        turnStarted = performance.now();
        if (res.destroyed) return;
      }
    }
    if (res.destroyed) return;
    if (!res.headersSent) res.status(200).type('application/json');
    res.end(`${pending}]}`);
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
