// A live Mailroom server on 127.0.0.1 for a test suite, on a fresh SQLite file or PostgreSQL schema,
// with its JSON log lines captured and a client from client/ pointed at it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type express from 'express';
import { pino } from 'pino';
import { createMailroomClient, type MailroomClient } from '../../client/index.ts';
import { loadConfig, type Config } from '../../server/config.ts';
import { startServer, type RunningServer } from '../../server/server.ts';
import { postgresSchema, type Backend } from './backends.ts';
import { forTheBlock } from './suite.ts';

export const TEST_KEY = 're_test0000000000000000000000000000';

export interface TestServer extends RunningServer {
  config: Config;
  client: MailroomClient;
  apiKey: string;
  /** Every log line the server wrote, parsed. */
  logs: Record<string, any>[];
  /** fetch against the server with the test key unless `headers` says otherwise. */
  request(path: string, init?: RequestInit): Promise<Response>;
  /** An operation called with a JSON body (when given) and the test key; its answer's JSON body. */
  api(method: string, path: string, body?: unknown): Promise<any>;
}

export interface TestServerOptions {
  config?: Partial<Config>;
  extraRoutes?: express.Router;
  spec?: string;
}

export async function startTestServer(backend: Backend, options: TestServerOptions = {}): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-test-'));
  const schema = backend === 'postgres' ? await postgresSchema() : undefined;
  const logs: Record<string, any>[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
  // Rate limiting off unless a suite sets it: suites send far more than 10 requests a second.
  const config: Config = { ...loadConfig({}), port: 0, dataDir, databaseUrl: schema?.url, apiKey: TEST_KEY, rateLimitPerSecond: 0, ...options.config };
  const running = await startServer(config, { logger, extraRoutes: options.extraRoutes, spec: options.spec });
  return {
    ...running,
    config,
    apiKey: TEST_KEY,
    logs,
    client: createMailroomClient({ apiKey: TEST_KEY, baseUrl: running.url }),
    request: (path, init = {}) =>
      fetch(running.url + path, { ...init, headers: { authorization: `Bearer ${TEST_KEY}`, ...(init.headers as Record<string, string>) } }),
    api: async (method, path, body) => {
      const init = { method, ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }) };
      return (await fetch(running.url + path, { ...init, headers: { authorization: `Bearer ${TEST_KEY}`, ...init.headers } })).json();
    },
    close: async () => {
      await running.close();
      await schema?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A test server for the describe block: started before its tests, closed after them. `options` may be
 * a function, read when the server starts, for a configuration made of parts started before it.
 */
export function withServer(backend: Backend, options: TestServerOptions | (() => TestServerOptions) = {}): TestServer {
  return forTheBlock(`the test server on ${backend}`, () => startTestServer(backend, typeof options === 'function' ? options() : options), (server) => server.close());
}
