// Starts a whole Mailroom server: contract check, store and migrations, first key, HTTP listener.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type express from 'express';
import { pino, type Logger } from 'pino';
import { ensureKey } from './apiKeys.ts';
import { createApp } from './app.ts';
import type { Config } from './config.ts';
import { assertValidSpec, loadSpec, specPath } from './contract.ts';
import { openStore, type Store } from './store/index.ts';

export interface RunningServer {
  url: string;
  store: Store;
  /** A key created because the store had none; print it once. */
  createdKey: string | undefined;
  /** Stops taking connections, lets in-flight requests finish, then closes the store. */
  close(): Promise<void>;
}

export async function startServer(
  config: Config,
  options: { logger?: Logger; spec?: string; extraRoutes?: express.Router } = {},
): Promise<RunningServer> {
  // Asynchronous writes: under load, lines queue up and leave in one system call rather than one each.
  const logger = options.logger ?? pino({ level: config.logLevel }, pino.destination({ dest: 1, sync: false }));
  const spec = loadSpec(options.spec ?? specPath);
  await assertValidSpec(spec);
  const store = await openStore(config, logger);
  try {
    const createdKey = await ensureKey(store, config.apiKey);
    const app = createApp({ spec, store, logger, config, extraRoutes: options.extraRoutes });
    const server = await listen(app, config.port, config.host);
    const { port } = server.address() as AddressInfo;
    const url = `http://${config.host}:${port}`;
    logger.info({ url, database: store.database.dialect }, 'Mailroom is listening');
    return {
      url,
      store,
      createdKey,
      close: async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        });
        await store.close();
        logger.flush();
      },
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}

function listen(app: express.Express, port: number, host: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = app.listen(port, host, (error?: Error) => (error ? reject(error) : resolve(server)));
  });
}
