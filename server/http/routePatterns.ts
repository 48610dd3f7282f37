// express-openapi-validator (5.6) finds a request's operation by trying every route of the contract,
// one after another, on every request (openapi.metadata.js lookupRoute): it turns each into a regular
// expression and matches it. With every route of the contract that is a large part of a small
// request's time, even once each expression is compiled once. Two changes, both to what that
// lookup reads rather than to the validator's code:
// - path-to-regexp compiles each route once: the validator reads `pathToRegexp` off path-to-regexp's
//   exports at each call, so the function there is replaced by one that hands back the same expression;
// - the lookup sees only the routes that could match: those whose first segment is the request's. The
//   validator reads `applyOpenApiMetadata` off its module's exports when it builds its middleware, and
//   that middleware reads `expressRouteMap` off the context it is given for each request; it is given
//   a context whose map is the request's few routes, in the contract's order, so the first match is
//   the one the whole list gives.
// It also gives path-to-regexp the validator's `strict` in the words it now reads (`trailing`), so
// that the app's `strict routing` holds for operations. test/server/validator-wiring.test.ts fails if
// the validator stops reading either as it does.
import { createRequire } from 'node:module';
import type { RequestHandler } from 'express';

type PathToRegexp = typeof import('path-to-regexp').pathToRegexp;
/** What applyOpenApiMetadata reads of its context; the rest is reached through the prototype. */
type RouteMap = Record<string, unknown>;
type Context = { expressRouteMap: RouteMap; useRequestUrl?: boolean };
type ApplyMetadata = (context: Context, responseApiDoc: unknown) => RequestHandler;

const require = createRequire(import.meta.url);
const pathToRegexpModule: { pathToRegexp: PathToRegexp } = require('path-to-regexp');
const metadataModule: { applyOpenApiMetadata: ApplyMetadata } = require('express-openapi-validator/dist/middlewares/openapi.metadata.js');
const compile = pathToRegexpModule.pathToRegexp;
const applyMetadata = metadataModule.applyOpenApiMetadata;
/** By route, then by the two options the validator passes (sensitive, strict) as a number 0–3. */
const compiled = new Map<string, ReturnType<PathToRegexp>[]>();

/** Makes the validator's operation lookup compile each route once and try only a request's own; calling it again is harmless. */
export function compileRoutePatternsOnce(): void {
  if (typeof applyMetadata !== 'function') throw new Error('express-openapi-validator has no applyOpenApiMetadata any more; revisit server/routePatterns.ts');
  if (pathToRegexpModule.pathToRegexp !== compile) return;
  pathToRegexpModule.pathToRegexp = ((path, options) => {
    // Only string routes with the validator's options are kept; anything else is compiled by the original.
    if (typeof path !== 'string' || (options && Object.keys(options).some((key) => key !== 'sensitive' && key !== 'strict'))) return compile(path, options);
    const { sensitive, strict } = (options ?? {}) as { sensitive?: boolean; strict?: boolean };
    const slot = (sensitive ? 1 : 0) + (strict ? 2 : 0);
    let byOptions = compiled.get(path);
    if (!byOptions) compiled.set(path, (byOptions = []));
    // The validator passes Express 4's `strict`, which path-to-regexp 8 no longer reads: its `trailing`
    // is what says whether a trailing slash may follow.
    return (byOptions[slot] ??= compile(path, { sensitive, trailing: !strict }));
  }) as PathToRegexp;
  metadataModule.applyOpenApiMetadata = (context, responseApiDoc) => {
    const routesFor = routesByFirstSegment(context.expressRouteMap);
    let routes: RouteMap | undefined;
    const narrowed: Context = Object.create(context, { expressRouteMap: { get: () => routes ?? context.expressRouteMap } });
    const lookUp = applyMetadata(narrowed, responseApiDoc);
    return (req, res, next) => {
      // The path the validator matches (lookupRoute's own choice), its query left out.
      routes = routesFor(context.useRequestUrl ? req.url : req.originalUrl);
      try {
        return lookUp(req, res, next);
      } finally {
        routes = undefined;
      }
    };
  };
}

/**
 * The routes a path could match: those whose first segment is the path's, and those whose first
 * segment is not a plain word (a parameter, say), which could match any; each group in the map's own
 * order. Case is ignored, as the validator's expressions ignore it unless told otherwise.
 */
export function routesByFirstSegment(routeMap: RouteMap): (path: string) => RouteMap {
  const firstSegment = (path: string) => (path.split(/[/?]/, 2)[1] ?? '').toLowerCase();
  const entries = Object.entries(routeMap).map(([route, methods]) => ({ route, methods, segment: firstSegment(route) }));
  const literal = (segment: string) => /^[a-z0-9_-]+$/.test(segment);
  const group = (segment: string | undefined) =>
    Object.fromEntries(entries.filter((entry) => entry.segment === segment || !literal(entry.segment)).map((entry) => [entry.route, entry.methods]));
  const groups = new Map([...new Set(entries.map((entry) => entry.segment).filter(literal))].map((segment) => [segment, group(segment)]));
  const elsewhere = group(undefined);
  return (path) => groups.get(firstSegment(path.startsWith('/') ? path : '')) ?? elsewhere;
}
