// The delivery worker, with the broadcast fan-out and the webhook outbox in loops beside it:
// `npm run worker` runs them as a process (start any number of them on PostgreSQL), and `npm start`
// runs them in a thread beside the HTTP server, so that building messages and writing a broadcast's
// emails never hold up a request. In that thread the webhook outbox is left out: the server's own
// thread posts webhooks (server/server.ts), which puts that work on the second core instead of
// slowing delivery, and costs requests little, since a post is mostly waiting. With
// INBOUND_SMTP_PORT, the listener for bounces and complaint reports runs here too: beside the worker
// whose mail they answer, and off the request path. Stops on SIGTERM, or on a 'stop' message from the thread's parent.
import { parentPort, workerData } from 'node:worker_threads';
import { pino } from 'pino';
import { FanoutWorker } from '../broadcasts/fanout.ts';
import { defaultPublicUrl, unsubscribeTokens } from '../broadcasts/unsubscribeToken.ts';
import { ConfigError, loadConfig, refuseUnsentMail, warnOfPlainHttp, type Config } from '../config.ts';
import { storeFailure } from '../store/storeFailure.ts';
import { captureTransport, smtpTransport } from '../delivery/transport.ts';
import { DeliveryWorker } from '../delivery/worker.ts';
import { startInbound } from '../inbound/listener.ts';
import { returnPaths } from '../delivery/returnPath.ts';
import { openStore } from '../store/index.ts';
import { WebhookDispatcher } from '../webhooks/dispatch.ts';

const config = configOrExit();
// Each loop's lines carry its role; pino would repeat a `role` given to a child of a child.
const lines = pino({ level: config.logLevel }, pino.destination({ dest: 1, sync: false }));
const logger = lines.child({ role: 'delivery' });
if (!config.smtpUrl && config.production) {
  // The capture transport is for development and tests: in production it is asked for (SMTP_URL=capture:), and said.
  logger.warn('SMTP_URL is capture:, so messages are captured in the store and marked delivered, not sent');
}
// In a thread, the server says where it listens (it may have been given port 0); a process of its own
// has PUBLIC_URL, or HOST and PORT as the server it works for was given them.
const fromServer = workerData as { publicUrl?: string; thread?: number } | null;
const publicUrl: string = config.publicUrl ?? fromServer?.publicUrl ?? defaultPublicUrl(config.host, config.port);
// Of several delivery threads, the first alone runs the fan-out (one is enough: it writes, the others
// would wait on its lease) and the inbound listener (its port can be bound once).
const first = (fromServer?.thread ?? 0) === 0;
if (!parentPort) warnOfPlainHttp(config, publicUrl, logger);
const { store, worker, fanout, webhooks, inbound } = await start().catch(cannotStart);
// Before the line that says the worker started: a SIGTERM sent on seeing it must find a handler (else
// it ends the process at once), and the logger writes from another thread, so the line can be read
// before the code after it has run.
parentPort?.on('message', (message) => message === 'stop' && void stop());
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
worker.start();
fanout?.start();
webhooks?.start();
logger.info({ transport: config.smtpUrl ? 'smtp' : 'capture', database: store.database.dialect }, 'delivery worker started');

async function start() {
  const store = await openStore(config, logger).catch(async (error) => {
    throw await storeFailure(config, error);
  });
  try {
    const links = { tokens: await unsubscribeTokens(store, config.unsubscribeSecret), publicUrl: () => publicUrl };
    const transport = config.smtpUrl ? smtpTransport(config.smtpUrl, { final: config.smtpFinal, timeoutMs: config.delivery.leaseMs / 2 }) : captureTransport();
    // Return paths are signed with the same secret as links, by the worker and read by the listener.
    const paths = await returnPaths(store, config.unsubscribeSecret);
    const worker = new DeliveryWorker(store, transport, logger, config.delivery, links, paths);
    const fanout = first ? new FanoutWorker(store, lines.child({ role: 'fanout' }), config.fanout) : undefined;
    const webhooks = parentPort ? undefined : new WebhookDispatcher(store, lines.child({ role: 'webhooks' }), config.webhooks);
    // The listener first: if its port cannot be had, the worker ends before it has claimed any email,
    // rather than leaving the emails it claimed to wait out their lease.
    const inbound = config.inbound && first ? await startInbound(store, lines.child({ role: 'inbound' }), { ...config.inbound, maxBytes: config.inboundMaxBytes, returnPaths: paths }) : undefined;
    return { store, worker, fanout, webhooks, inbound };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/**
 * A process says why in one line and exits 1, as `npm start` does. In a thread, a configuration that
 * cannot work (INBOUND_SMTP_PORT in use) is told to the supervisor, which stops the server with it;
 * anything else (a database down for now) ends the thread, and the supervisor starts another.
 */
function cannotStart(error: unknown): never {
  if (!parentPort) {
    process.stderr.write(`Mailroom's delivery worker could not start: ${(error as Error).message}\n`);
    process.exit(1);
  }
  if (error instanceof ConfigError) parentPort.postMessage({ cannotStart: error.message });
  throw error;
}

function configOrExit(): Config {
  try {
    const config = loadConfig();
    refuseUnsentMail(config);
    return config;
  } catch (error) {
    process.stderr.write(`Mailroom's delivery worker could not start: ${(error as Error).message}\n`);
    process.exit(1);
  }
}

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  const asked = performance.now();
  // A process keeps SHUTDOWN_GRACE_MS as `npm start` does (in a thread, the supervisor keeps it): a
  // send still waiting on its relay then ends with the process, and its email goes back to the
  // outbox when its lease runs out (delivery is at least once).
  const grace = parentPort
    ? undefined
    : setTimeout(() => {
        logger.warn({ graceMs: config.shutdownGraceMs }, 'shutdown grace period over: stopping with emails in hand; they are sent again once their lease runs out');
        logger.flush();
        process.exit(0);
      }, config.shutdownGraceMs);
  await Promise.all([worker.stop(), fanout?.stop(), webhooks?.stop(), inbound?.close()]);
  clearTimeout(grace);
  await store.close();
  logger.info({ drainMs: Math.round(performance.now() - asked) }, 'delivery worker stopped');
  logger.flush();
  if (parentPort) parentPort.close();
  else process.exit(0);
}
