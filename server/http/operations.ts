// What whoever runs the server needs: the health check, the contract itself, its reference page, and
// its metrics.
import { readFileSync } from 'node:fs';
import { Router } from 'express';
import type { OperationHandler } from '../api.ts';
import { projectFile, specPath } from '../contract.ts';
import { databaseUnavailable } from './errors.ts';
import type { Metrics } from '../metrics.ts';
import type { Handlers } from './operationRouter.ts';
import type { Store } from '../store/index.ts';
import { isUnavailable } from '../store/database.ts';
import { StoreFileGone } from '../store/sqlite.ts';

const docsPath = projectFile('generated/docs.html');

/** The paths contractRoutes serves. */
export const PAGE_PATHS = ['/openapi.yaml', '/docs', '/metrics', '/favicon.ico'] as const;

/** Served before the validator: these are not API operations. /metrics only when `metrics` is given. */
export function contractRoutes(metrics?: Metrics): Router {
  const spec = readFileSync(specPath);
  const router = Router();
  // No key: scrapers carry none, and the figures name no contact, key or message. METRICS=off removes it.
  if (metrics) router.get('/metrics', metrics.scrape);
  return router
    .get('/openapi.yaml', (_req, res) => {
      res.type('application/yaml').send(spec);
    })
    .get('/docs', (_req, res, next) => {
      // The page is self-contained; this keeps it from reaching anywhere else, even for its logo.
      // Sent from the file: a page this large, seldom asked for, is not worth keeping in memory.
      // Its search compiles a function at run time: eval is allowed to this page of the contract alone.
      res.set('Content-Security-Policy', "default-src 'self' 'unsafe-inline' data: blob:; script-src 'self' 'unsafe-inline' 'unsafe-eval' blob:");
      res.sendFile(docsPath, { etag: false, lastModified: false }, (error) => error && !res.headersSent && next(error));
    })
    // Browsers ask for it on every page; there is none, and a 404 is an error in their console.
    .get('/favicon.ico', (_req, res) => {
      res.status(204).end();
    });
}

export function healthHandlers(store: Store): Handlers {
  const getHealth: OperationHandler<'getHealth'> = async (_req, res) => {
    try {
      await store.ping();
    } catch (err) {
      // Out of reach, it is answered and logged (a warning) as every other operation's failure is.
      throw err instanceof StoreFileGone || isUnavailable(err) ? err : databaseUnavailable();
    }
    res.json({ status: 'ok' });
  };
  return { getHealth };
}
