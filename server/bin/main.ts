// `npm start`: runs the server, and the delivery worker in DELIVERY_THREADS threads, until SIGTERM or SIGINT; then
// stops taking requests, finishes those in flight and the messages in hand (each for up to
// SHUTDOWN_GRACE_MS), and closes the store.
import { Worker } from 'node:worker_threads';
import { loadConfig, refuseUnsentMail } from '../config.ts';
import { superviseThread } from '../delivery/thread.ts';
import { startServer } from '../server.ts';

// Handlers first: a signal that finds none ends the process at once, unclean. One that comes during
// start-up, or on seeing the "listening" line (written from the logger's thread, it can be read before
// the code after it has run), is held until the server can stop in order.
let stopAsked = false;
let stop = async () => void (stopAsked = true);
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());

try {
  const config = loadConfig();
  if (config.deliveryWorker) refuseUnsentMail(config);
  const running = await startServer(config, { webhooks: config.deliveryWorker });
  // Beside main.js in the build; the thread reads the same environment, and is told the public URL
  // (with PORT=0, only the listening server knows its port).
  // The first thread also runs the broadcast fan-out and the inbound listener (server/worker.ts).
  const threads = config.deliveryWorker && !stopAsked ? config.deliveryThreads : 0;
  const delivery = Array.from({ length: threads }, (_, thread) =>
    superviseThread(
      () => new Worker(new URL('./worker.js', import.meta.url), { workerData: { publicUrl: running.publicUrl, thread } }),
      running.logger.child({ role: 'supervisor', thread }),
      undefined,
      (reason) => void cannotStart(reason),
    ),
  );
  if (running.createdKey) {
    process.stderr.write(`\nCreated an API key; it is shown only this once:\n\n  ${running.createdKey}\n\n`);
  }
  let stopping = false;
  stop = async () => {
    if (stopping) return;
    stopping = true;
    const asked = performance.now();
    try {
      await Promise.all([running.close(), ...delivery.map((thread) => thread.stop(config.shutdownGraceMs))]);
      running.logger.info({ drainMs: Math.round(performance.now() - asked) }, 'Mailroom stopped');
      running.logger.flush();
      process.exit(0);
    } catch (error) {
      process.stderr.write(`Mailroom did not stop cleanly: ${(error as Error).message}\n`);
      process.exit(1);
    }
  };
  // A delivery thread that can never start (its inbound port taken) stops the whole process, as a bad
  // variable does: a server that takes email it can never send is worse than one that does not start.
  const cannotStart = async (reason: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`Mailroom could not start: ${reason}\n`);
    await Promise.allSettled([running.close(), ...delivery.map((thread) => thread.stop(0))]);
    process.exit(1);
  };
  if (stopAsked) void stop();
} catch (error) {
  process.stderr.write(`Mailroom could not start: ${(error as Error).message}\n`);
  process.exit(1);
}
