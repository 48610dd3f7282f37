// The typed Mailroom client: openapi-fetch over the paths generated from openapi.yaml.
import createClient, { type Client, type Middleware } from 'openapi-fetch';
import type { components, paths } from '../generated/schema.js';

export type { components, paths };
export type MailroomSchemas = components['schemas'];
export type MailroomError = components['schemas']['Error'];

export interface MailroomClientOptions {
  apiKey: string;
  baseUrl: string;
  /** A fetch implementation; defaults to the global one. */
  fetch?: typeof globalThis.fetch;
}

export type MailroomClient = Client<paths, 'application/json'>;

export function createMailroomClient({ apiKey, baseUrl, fetch }: MailroomClientOptions): MailroomClient {
  const client = createClient<paths, 'application/json'>({ baseUrl, ...(fetch ? { fetch } : {}) });
  client.use(bearer(apiKey));
  return client;
}

function bearer(apiKey: string): Middleware {
  return {
    onRequest({ request }) {
      request.headers.set('Authorization', `Bearer ${apiKey}`);
      return request;
    },
  };
}
