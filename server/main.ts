// `npm start`: runs the server until SIGTERM or SIGINT, then shuts down gracefully.
import { loadConfig } from './config.ts';
import { startServer } from './server.ts';

try {
  const running = await startServer(loadConfig());
  if (running.createdKey) {
    process.stderr.write(`\nCreated an API key; it is shown only this once:\n\n  ${running.createdKey}\n\n`);
  }
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await running.close();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} catch (error) {
  process.stderr.write(`Mailroom could not start: ${(error as Error).message}\n`);
  process.exit(1);
}
