// Starts a whole Mailroom server: contract check, store and migrations, first key, HTTP listener.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type express from 'express';
import { pino, type Logger } from 'pino';
import { ensureKey } from './apiKeys/key.ts';
import { createApp } from './http/app.ts';
import type { UnsubscribeLinks } from './broadcasts/mail.ts';
import { defaultPublicUrl, UnsubscribeTokens } from './broadcasts/unsubscribeToken.ts';
import { linkSecret } from './linkToken.ts';
import { AttachmentLinks } from './emails/attachmentLinks.ts';
import { answerClientErrors, answerConnect, answerExpectations, checkingRequestHead } from './http/clientErrors.ts';
import { ConfigError, warnOfPlainHttp, type Config } from './config.ts';
import { storeFailure } from './store/storeFailure.ts';
import { loadSpec, specPath } from './contract.ts';
import { openStore, type Store } from './store/index.ts';
import { WebhookDispatcher } from './webhooks/dispatch.ts';
import { sendingDomains } from './domains/index.ts';

export interface RunningServer {
  url: string;
  /** Where people reach the server: PUBLIC_URL, or `url`. Unsubscribe links start with it. */
  publicUrl: string;
  /** What this server makes unsubscribe links with; a delivery worker beside it needs the same. */
  links: UnsubscribeLinks;
  store: Store;
  logger: Logger;
  /** A key created because the store had none; print it once. */
  createdKey: string | undefined;
  /**
   * Stops taking connections and lets in-flight requests finish, for up to SHUTDOWN_GRACE_MS; then
   * closes the connections still open (a client that never reads its response, say) and the store.
   */
  close(): Promise<void>;
}

export async function startServer(
  config: Config,
  options: {
    logger?: Logger;
    spec?: string;
    extraRoutes?: express.Router;
    /** Post webhooks from this thread too (`npm start`); see server/worker.ts for why here. */
    webhooks?: boolean;
  } = {},
): Promise<RunningServer> {
  // Asynchronous writes: under load, lines queue up and leave in one system call rather than one each.
  const logger = options.logger ?? pino({ level: config.logLevel }, pino.destination({ dest: 1, sync: false }));
  const spec = loadSpec(options.spec ?? specPath);
  const store = await openStore(config, logger).catch(async (error) => {
    throw await storeFailure(config, error);
  });
  try {
    const createdKey = await ensureKey(store, config.apiKey);
    // Stored and revoked since (by `npm run keys revoke`, say), it is refused: an operator starting with it to get back in should hear why.
    if (config.apiKey && (await store.apiKeys.findByToken(config.apiKey))?.revoked_at) logger.warn('MAILROOM_API_KEY is a revoked key: requests made with it are refused. Create another with `npm run keys -- create`.');
    // Known once the server listens, when PORT=0 let the system choose; no request is served before.
    let publicUrl = config.publicUrl ?? '';
    const secret = await linkSecret(store, config.unsubscribeSecret);
    const links: UnsubscribeLinks = { tokens: new UnsubscribeTokens(secret), publicUrl: () => publicUrl };
    const attachmentLinks = new AttachmentLinks(secret, () => publicUrl);
    const domains = sendingDomains(store, config.domains, logger.child({ role: 'domains' }));
    const app = createApp({ spec, store, logger, config, links, attachmentLinks, domains, extraRoutes: options.extraRoutes });
    const server = await listen(app, config);
    const drain = draining(server, config);
    const { port } = server.address() as AddressInfo;
    const url = `http://${config.host}:${port}`;
    publicUrl ||= defaultPublicUrl(config.host, port);
    warnOfPlainHttp(config, publicUrl, logger);
    logger.info({ url, database: store.database.dialect }, 'Mailroom is listening');
    const webhooks = options.webhooks ? new WebhookDispatcher(store, logger.child({ role: 'webhooks' }), config.webhooks) : undefined;
    webhooks?.start();
    domains.checker.start();
    return {
      url,
      publicUrl,
      links,
      store,
      logger,
      createdKey,
      close: async () => {
        const closed = drain();
        const grace = setTimeout(() => {
          logger.warn({ graceMs: config.shutdownGraceMs }, 'shutdown grace period over: closing the connections still open');
          server.closeAllConnections();
        }, config.shutdownGraceMs);
        await Promise.all([closed, webhooks?.stop(), domains.checker.stop()]);
        clearTimeout(grace);
        await store.close();
        logger.flush();
      },
    };
  } catch (error) {
    await store.close();
    // A SQLite file that opens but cannot be written (its permissions) fails at the first write, here.
    throw (error as { code?: string }).code === 'SQLITE_READONLY' ? await storeFailure(config, error) : error;
  }
}

/**
 * Graceful drain for keep-alive clients. Node's server.close() destroys every connection idle at that
 * instant, and one whose client has just sent its next request (still unread) gets a reset; a
 * response sent during the drain that says `keep-alive` invites another request that meets the same
 * end. So, from the drain on, every response not yet begun says `Connection: close` (Node then
 * closes its connection once it is sent), and an idle connection is closed only after it has stayed
 * quiet a moment: a client that was about to send gets its answer, with `Connection: close`.
 * Returns what starts the drain; it resolves once every connection has closed.
 */
function draining(server: Server, config: Config): () => Promise<void> {
  let drainingNow = false;
  const inFlight = new Set<ServerResponse>();
  const connections = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
  });
  server.on('request', (req, res: ServerResponse) => {
    if (drainingNow) {
      res.shouldKeepAlive = false;
      req.socket.setTimeout(0); // no longer quiet: it is served, whatever its request takes
    }
    inFlight.add(res);
    res.once('close', () => inFlight.delete(res));
  });
  return () => {
    drainingNow = true;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    const busy = new Set<Socket>();
    for (const res of inFlight) {
      if (!res.headersSent) res.shouldKeepAlive = false;
      if (res.socket) busy.add(res.socket);
    }
    const quietMs = Math.min(DRAIN_QUIET_MS, config.keepAliveTimeoutMs || DRAIN_QUIET_MS);
    // Node's own timeout handling destroys a connection that times out with no request in it.
    for (const socket of connections) if (!busy.has(socket)) socket.setTimeout(quietMs);
    return closed;
  };
}

/** How long an idle keep-alive connection is left open once the drain begins (see draining()). */
const DRAIN_QUIET_MS = 500;

/** Every wait on a client is bounded: for its headers, its whole request, and its next request. */
function listen(app: express.Express, config: Config): Promise<Server> {
  // Node refuses a headers timeout longer than the request timeout; 0 turns either off.
  const headersTimeout = config.requestTimeoutMs > 0 && config.headersTimeoutMs > 0 ? Math.min(config.headersTimeoutMs, config.requestTimeoutMs) : config.headersTimeoutMs;
  const server = createServer(
    {
      headersTimeout,
      requestTimeout: config.requestTimeoutMs,
      keepAliveTimeout: config.keepAliveTimeoutMs,
      // Node checks the first two every 30 s by default: far too coarse for timeouts of a few seconds.
      connectionsCheckingInterval: Math.min(1000, headersTimeout || 1000),
      requireHostHeader: false, // refused by checkingRequestHead, with a body
    },
    checkingRequestHead(app),
  );
  answerClientErrors(server, { headersMs: headersTimeout, requestMs: config.requestTimeoutMs });
  answerExpectations(server);
  answerConnect(server);
  // server.close() would destroy the idle connections at once; draining() closes them once quiet.
  server.closeIdleConnections = () => {};
  return new Promise((resolve, reject) => {
    // A port taken, or a host that is not this machine's, named as the variables that chose them.
    const refused = (error: NodeJS.ErrnoException) => reject(new ConfigError(`the HTTP server cannot listen on HOST ${config.host}, PORT ${config.port}: ${error.code ?? error.message}`));
    server.once('error', refused);
    server.listen(config.port, config.host, () => {
      server.off('error', refused);
      resolve(server);
    });
  });
}
