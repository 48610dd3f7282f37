// HEAD, which the contract does not declare: answered as the GET would be, without the body (Node
// leaves it out for a HEAD however the request is handled), as HTTP asks of a server. Uptime checks and
// load balancers send HEAD.
import type { RequestHandler } from 'express';

/** Mounted before the validator's routing, which then matches and checks the request as the GET. */
export const headAsGet: RequestHandler = (req, _res, next) => {
  if (req.method === 'HEAD') req.method = 'GET';
  next();
};

/** The methods a path allows, HEAD added wherever GET is (for Allow, and for CORS preflights). */
export const withHead = (methods: string[]): string[] => (methods.includes('GET') && !methods.includes('HEAD') ? [...methods, 'HEAD'] : methods);
