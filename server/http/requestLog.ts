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
 * An unsubscribe or download link's token works for whoever holds it: logs keep the path, not the
 * token, however the path is spelled (`/Unsubscribe/…`, `/%75nsubscribe/…`, answered 404). Nor do they
 * keep a query parameter's value when its name says it is a secret (`?api_key=re_…`).
 */
function withoutToken(url: string): string {
  const at = url.search(/[?#]/);
  const [path, rest] = at < 0 ? [url, ''] : [url.slice(0, at), url.slice(at)];
  const segments = path.split('/');
  const first = segments.findIndex((segment) => segment !== '');
  if (first >= 0 && first + 1 < segments.length && /^(unsubscribe|attachments)$/i.test(decodedOrSo(segments[first]!))) segments[first + 1] = '…';
  return segments.join('/') + rest.replace(/([?&][^=&#]*(?:key|token|secret|password|signature)[^=&#]*=)[^&#]*/gi, '$1…');
}

const decodedOrSo = (segment: string) => {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
};
