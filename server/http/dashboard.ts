// The dashboard: a single-page app that `npm run build` bundles into build/dashboard, served here under
// /dashboard, before the validator, since its pages are not API operations. It calls only the public
// API, from the browser, with the key its user signs in with; the server gives it nothing else.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { Router, type Response } from 'express';
import { projectFile } from '../contract.ts';

const builtAt = projectFile('build/dashboard/');

// Scripts only from this origin, no inline script and no eval. Inline styles are allowed because an
// email's HTML, shown in a sandboxed frame that inherits this policy, is styled inline; its remote
// images stay blocked, as mail clients block them until asked.
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

interface Asset {
  type: string;
  body: Buffer;
  gzipped: Buffer;
  version: string;
}

function asset(file: string, type: string): Asset | undefined {
  const path = builtAt + file;
  if (!existsSync(path)) return undefined;
  const body = readFileSync(path);
  return { type, body, gzipped: gzipSync(body), version: createHash('sha256').update(body).digest('hex').slice(0, 16) };
}

function send(res: Response, accepted: string | undefined, { type, body, gzipped }: Asset): void {
  res.type(type).set('Vary', 'Accept-Encoding');
  if (/\bgzip\b/.test(accepted ?? '')) res.set('Content-Encoding', 'gzip').send(gzipped);
  else res.send(body);
}

export function dashboardRoutes(): Router {
  const script = asset('dashboard.js', 'text/javascript');
  const style = asset('dashboard.css', 'text/css');
  const router = Router();
  router.use('/dashboard', (_req, res, next) => {
    res.set({ 'Content-Security-Policy': DASHBOARD_CSP, 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer' });
    next();
  });
  if (!script || !style) {
    return router.get(['/dashboard', '/dashboard/*rest'], (_req, res) => {
      res.status(503).type('text').send('The dashboard is not built: run `npm run build`, which `npm start` does.\n');
    });
  }
  const shell = Buffer.from(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Mailroom</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/dashboard/assets/dashboard.css?v=${style.version}">
<script type="module" src="/dashboard/assets/dashboard.js?v=${script.version}"></script>
</head>
<body><div id="app"></div></body>
</html>
`);
  const page: Asset = { type: 'html', body: shell, gzipped: gzipSync(shell), version: '' };
  // Asset URLs carry their content's hash, so browsers may keep them; the page itself is always asked anew.
  const immutable = 'public, max-age=31536000, immutable';
  return router
    .get('/dashboard/assets/dashboard.js', (req, res) => send(res.set('Cache-Control', immutable), req.get('accept-encoding'), script))
    .get('/dashboard/assets/dashboard.css', (req, res) => send(res.set('Cache-Control', immutable), req.get('accept-encoding'), style))
    // Every other path under /dashboard is a page of the app, which reads the path itself: a route with
    // a parameter would have Express decode it, and answer a malformed one with an error instead.
    .use('/dashboard', (req, res, next) => (req.method === 'GET' || req.method === 'HEAD' ? send(res.set('Cache-Control', 'no-cache'), req.get('accept-encoding'), page) : next()));
}
