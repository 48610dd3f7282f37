// The JSON body parser, with nesting bounded before JSON.parse runs. A few megabytes of `[[[[…]]]]`
// hold the event loop for most of a second in JSON.parse, and deeper still can overflow the stack; no
// request the contract describes nests more than a handful of levels. One linear pass over the bytes,
// counting brackets outside strings, refuses such a body with 400 invalid_json first.
import { isUtf8 } from 'node:buffer';
import express, { type Request, type RequestHandler, type Response } from 'express';
import { bytesOf } from '../config.ts';
import { ApiError } from './errors.ts';

export const MAX_NESTING = 64;

/**
 * express.json with the nesting bound.
 *
 * A body whose Content-Length is over the limit is refused at once, before it is read: express.json
 * reads such a body to its end before it answers, and a client that declares more than it sends then
 * waits for an answer while the server waits for the rest, until the request times out. The
 * connection is not closed with the answer: a client still writing its body (fetch, the SDKs) would
 * meet a reset and report EPIPE, never reading the 413. Node reads and drops the rest of the body,
 * and closes the connection once it has been quiet for the keep-alive timeout.
 */
export function jsonBody(limit: string): RequestHandler {
  const maxBytes = bytesOf(limit);
  const parse = express.json({
    limit: maxBytes,
    verify: (_req, _res, body, encoding) => {
      if (nestedDeeperThan(MAX_NESTING, utf8(body, encoding))) {
        throw new ApiError(400, 'invalid_json', `The body is nested deeper than ${MAX_NESTING} levels.`);
      }
    },
  });
  return (req, res, next) => {
    if (Number(req.get('content-length')) > maxBytes) {
      throw new ApiError(413, 'payload_too_large', `The body is larger than ${maxBytes} bytes.`);
    }
    parse(req, res, next);
  };
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * Whether arrays and objects nest deeper than `max`. In UTF-8 every byte of a multi-byte character is
 * 0x80 or above, so scanning bytes for these ASCII ones is exact. Strings are skipped with indexOf
 * (native, and most of a large body is strings). Malformed JSON is left to JSON.parse.
 */
export function nestedDeeperThan(max: number, body: Uint8Array): boolean {
  let depth = 0;
  for (let i = 0; i < body.length; i++) {
    const byte = body[i];
    if (byte === QUOTE) {
      i = endOfString(body, i + 1);
      if (i < 0) return false;
    } else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
      if (++depth > max) return true;
    } else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) depth--;
  }
  return false;
}

/** The index of the quote that closes the string starting at `from`, or -1 if none does. */
function endOfString(body: Uint8Array, from: number): number {
  for (let quote = body.indexOf(QUOTE, from); quote >= 0; quote = body.indexOf(QUOTE, quote + 1)) {
    let backslashes = 0;
    while (body[quote - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote; // an odd run escapes the quote
  }
  return -1;
}

/**
 * The body as UTF-8 bytes: as it came, or re-encoded from the UTF-16 that the JSON parser also takes.
 * Bytes that are not text in their encoding are refused: the parser would turn each into U+FFFD, and
 * what was stored would not be what was sent.
 */
function utf8(body: Buffer, encoding: string): Uint8Array {
  const notText = () => new ApiError(400, 'invalid_json', `The body is not valid ${encoding.toUpperCase()}.`);
  if (encoding === 'utf-8' || encoding === 'utf8') {
    if (!isUtf8(body)) throw notText();
    return body;
  }
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(encoding, { fatal: true });
  } catch {
    throw new ApiError(415, 'unsupported_media_type', 'The body must be JSON in UTF-8 or UTF-16.');
  }
  try {
    return Buffer.from(decoder.decode(body), 'utf8');
  } catch {
    throw notText();
  }
}

/**
 * `parse`, holding its refusal of a body (malformed, nested too deep, not text, an unknown encoding)
 * until the operation is known: only an operation that takes a JSON body has it judged. A body over
 * the limit is refused at once all the same.
 */
export function holdingRefusal(parse: RequestHandler): RequestHandler {
  return (req, res, next) =>
    parse(req, res, (refusal?: unknown) => {
      if (refusal !== undefined) res.locals.bodyRefusal = refusal;
      next();
    });
}

const takesJson = (req: Request) => {
  const content = (req.openapi?.schema as { requestBody?: { content?: Record<string, unknown> } } | undefined)?.requestBody?.content;
  return content !== undefined && 'application/json' in content;
};

/**
 * The parser's refusal, for an operation that takes JSON. One that takes a form (the one-click
 * unsubscribe) refuses a JSON one for its media type, 415, in the request check, however the JSON
 * reads; one that takes no body at all (a cancel, a publish) ignores whatever came, as it would any
 * other bytes: its contract declares no 400.
 */
export const bodyRefusal = (req: Request, res: Response) => (takesJson(req) ? res.locals.bodyRefusal : undefined);
