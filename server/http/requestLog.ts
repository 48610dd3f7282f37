// One JSON log line per request. Links carry their own credentials (unsubscribe and download
// tokens, a key in a query), and a log line must not: they are written with the secret left out.
import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';

/** One JSON log line per request, tied to its x-request-id, which error logs repeat. */
export function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const { method } = req; // as it came: HEAD is answered as GET (server/head.ts)
    // A client's own id is kept only when it is short and plain: it is echoed and logged on every line.
    const given = req.get('x-request-id');
    const reqId = given && /^[\x20-\x7e]{1,200}$/.test(given) ? given : randomUUID();
    const started = performance.now();
    res.locals.reqId = reqId;
    res.setHeader('x-request-id', reqId);
    res.on('finish', () => {
      logger.info({ reqId, method, url: withoutToken(req.originalUrl), status: res.statusCode, ms: Math.round(performance.now() - started) }, 'request');
    });
    next();
  };
}

/**
 * An unsubscribe or download link's token works for whoever holds it: logs keep the path up to the
 * segment that names the link (`/unsubscribe`, `/attachments`), never what follows it, however it is
 * spelled (`/Unsubscribe/…`, `/%75nsubscribe/…`, `/unsubscribe//…`, `/unsubscribe/%2F…`, a prefix a
 * proxy left before it, a query), answered or not. So `/emails/<id>/attachments/<id>` keeps no
 * attachment id either. Elsewhere, a query parameter's value is left out when its name says it is a
 * secret (`?api_key=re_…`).
 */
function withoutToken(url: string): string {
  const at = url.search(/[?#]/);
  const [path, rest] = at < 0 ? [url, ''] : [url.slice(0, at), url.slice(at)];
  const segments = path.split('/');
  const link = segments.findIndex((segment) => /unsubscribe|attachments/i.test(decoded(segment)));
  if (link < 0) return path + rest.replace(/([?&][^=&#]*(?:key|token|secret|password|signature)[^=&#]*=)[^&#]*/gi, '$1…');
  // A segment that only names the link is kept as spelled; one that holds more (`unsubscribe%2F…`) is not.
  const named = /^(unsubscribe|attachments)$/i.test(decoded(segments[link]!));
  if (named && link === segments.length - 1 && rest === '') return path;
  return [...segments.slice(0, named ? link + 1 : link), '…'].join('/');
}

/** A segment as it reads once percent-decoded, again while it changes (`%252F` is a slash too, to some). */
function decoded(segment: string): string {
  let text = segment;
  for (let round = 0; round < 3; round++) {
    try {
      const next = decodeURIComponent(text);
      if (next === text) break;
      text = next;
    } catch {
      break;
    }
  }
  return text;
}
