// Cross-origin access for browser pages (CORS_ORIGINS), answered before the validator's routing: a
// preflight is an OPTIONS request, which the contract does not declare and the validator would refuse
// with 405. What a page may send and read follows the contract: the methods its paths use, the header
// parameters it declares, and the response headers it declares (rate limits, Retry-After).
import cors from 'cors';
import type { RequestHandler } from 'express';
import { operationsOf, type OpenApiDocument } from '../contract.ts';
import { withHead } from './head.ts';

/** Sent by every client besides the contract's own header parameters: the key, the JSON body, the SDK's name. */
const BASE_REQUEST_HEADERS = ['Authorization', 'Content-Type', 'User-Agent', 'x-request-id'];
/** Set on every response by the request log (server/app.ts), outside the contract. */
const BASE_EXPOSED_HEADERS = ['x-request-id'];
/** How long a browser may reuse a preflight's answer, in seconds. */
const PREFLIGHT_MAX_AGE_S = 600;

/**
 * The CORS middleware for `origins` (exact origins such as `https://app.example.com`, or `*` for any),
 * or undefined when the list is empty: then no response carries any CORS header.
 */
export function crossOrigin(origins: string[], spec: OpenApiDocument): RequestHandler | undefined {
  if (origins.length === 0) return undefined;
  for (const origin of origins) {
    if (origin !== '*' && !isBareOrigin(origin)) throw new Error(`CORS_ORIGINS: "${origin}" is not an origin (scheme://host[:port], no path), nor *`);
  }
  const anyOrigin = origins.includes('*');
  const allowed = new Set(origins);
  const { methods, requestHeaders, responseHeaders } = contractSurface(spec);
  const policy = cors({
    // An origin not listed gets no CORS header at all, so its browser refuses to hand over the response.
    origin: anyOrigin ? '*' : (origin, done) => done(null, origin !== undefined && allowed.has(origin) ? origin : false),
    methods,
    allowedHeaders: [...BASE_REQUEST_HEADERS, ...requestHeaders],
    exposedHeaders: [...BASE_EXPOSED_HEADERS, ...responseHeaders],
    maxAge: PREFLIGHT_MAX_AGE_S,
    // No cookies are read: keys travel in Authorization, which a page sets itself.
    credentials: false,
  });
  return (req, res, next) => {
    // The answer depends on Origin unless every origin gets the same one: caches must know.
    if (!anyOrigin) res.vary('Origin');
    policy(req, res, (error?: unknown) => {
      if (error) return next(error);
      // A preflight from an origin not listed: answered without CORS headers (the browser then stops),
      // rather than passed on to be refused as an undeclared method.
      if (req.method === 'OPTIONS' && req.get('access-control-request-method')) return void res.status(204).end();
      next();
    });
  };
}

function isBareOrigin(value: string): boolean {
  try {
    return new URL(value).origin === value;
  } catch {
    return false;
  }
}

/** The methods, request header parameters and response headers the contract declares, by name. */
export function contractSurface(spec: OpenApiDocument): { methods: string[]; requestHeaders: string[]; responseHeaders: string[] } {
  const methods = withHead([...new Set(operationsOf(spec).map(({ method }) => method.toUpperCase()))]);
  const requestHeaders = new Set<string>();
  const responseHeaders = new Set<string>();
  const visit = (node: unknown): void => {
    if (!node || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach(visit);
    const record = node as Record<string, unknown>;
    if (record.in === 'header' && typeof record.name === 'string') requestHeaders.add(record.name);
    for (const [key, value] of Object.entries(record)) {
      // Inside paths and responses, a `headers` map is keyed by header names (response headers).
      if (key === 'headers' && value && typeof value === 'object' && 'description' in record) Object.keys(value).forEach((name) => responseHeaders.add(name));
      visit(value);
    }
  };
  const document = spec as unknown as { paths?: Record<string, Record<string, unknown>>; components?: { parameters?: unknown; responses?: unknown } };
  for (const item of Object.values(document.paths ?? {})) visit(item);
  visit(document.components?.parameters);
  visit(document.components?.responses);
  return { methods: methods.sort(), requestHeaders: [...requestHeaders].sort(), responseHeaders: [...responseHeaders].sort() };
}
