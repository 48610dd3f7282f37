// express-openapi-validator (5.6) finds a request's operation by turning every route of the contract
// into a regular expression, one after another, on every request (openapi.metadata.js lookupRoute):
// about a tenth of a small request's time. The routes are the contract's, a fixed set, so each is
// compiled once here and the same expression is handed back after. The validator reads
// `pathToRegexp` off path-to-regexp's exports at each call, which is what lets this take its place;
// test/server/validator-wiring.test.ts fails if that stops being so.
import { createRequire } from 'node:module';

type PathToRegexp = typeof import('path-to-regexp').pathToRegexp;

const pathToRegexpModule: { pathToRegexp: PathToRegexp } = createRequire(import.meta.url)('path-to-regexp');
const compile = pathToRegexpModule.pathToRegexp;
/** By route, then by the two options the validator passes (sensitive, strict) as a number 0–3. */
const compiled = new Map<string, ReturnType<PathToRegexp>[]>();

/** Makes path-to-regexp compile each (route, options) pair once per process; calling it again is harmless. */
export function compileRoutePatternsOnce(): void {
  if (pathToRegexpModule.pathToRegexp !== compile) return;
  pathToRegexpModule.pathToRegexp = ((path, options) => {
    // Only string routes with the validator's options are kept; anything else is compiled as before.
    if (typeof path !== 'string' || (options && Object.keys(options).some((key) => key !== 'sensitive' && key !== 'strict'))) return compile(path, options);
    const { sensitive, strict } = (options ?? {}) as { sensitive?: boolean; strict?: boolean };
    const slot = (sensitive ? 1 : 0) + (strict ? 2 : 0);
    let byOptions = compiled.get(path);
    if (!byOptions) compiled.set(path, (byOptions = []));
    return (byOptions[slot] ??= compile(path, options));
  }) as PathToRegexp;
}
