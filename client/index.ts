// The typed Mailroom client: openapi-fetch over the paths generated from openapi.yaml, plus the helpers
// people expect (resource methods, walking every contact, retries). No Node-only imports: it runs in
// browsers too.
import createClient, { type Client, type Middleware } from 'openapi-fetch';
import type { components, operations, paths } from '../generated/schema.js';
import { retryingFetch, type RetryOptions } from './retry.ts';

export type { components, paths, RetryOptions };
export type MailroomSchemas = components['schemas'];
export type MailroomError = components['schemas']['Error'];

type Schemas = components['schemas'];
type Body<Op extends keyof operations> = operations[Op] extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;
type Query<Op extends keyof operations> = NonNullable<operations[Op]['parameters']['query']>;

/** What every call returns: openapi-fetch's result, with `error` the contract's Error. */
export type Result<T> = { data: T; error?: undefined; response: Response } | { data?: undefined; error: MailroomError; response: Response };

export type StrictBatchResult = Omit<Schemas['BatchResult'], 'errors'>;
export type PermissiveBatchResult = Schemas['BatchResult'] & { errors: Schemas['BatchItemError'][] };

export interface MailroomClientOptions {
  /** Defaults to the MAILROOM_API_KEY environment variable where there is one. */
  apiKey?: string;
  baseUrl: string;
  /** A fetch implementation; defaults to the global one. */
  fetch?: typeof globalThis.fetch;
  /** Retry 429s, and 5xx or network errors where repeating is safe; sends then carry an Idempotency-Key. */
  retry?: boolean | RetryOptions;
}

export type MailroomClient = ReturnType<typeof createMailroomClient>;

/** A failed call, thrown by the helpers that cannot return an error (the contact iterator). */
export class MailroomApiError extends Error {
  constructor(readonly error: MailroomError) {
    super(`${error.name}: ${error.message}`);
  }
}

export function createMailroomClient(options: MailroomClientOptions) {
  const apiKey = options.apiKey ?? (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.MAILROOM_API_KEY;
  if (!apiKey) throw new Error('Mailroom: no API key. Pass `apiKey`, or set MAILROOM_API_KEY.');
  const baseFetch = options.fetch ?? globalThis.fetch;
  const fetch = options.retry ? retryingFetch(baseFetch, options.retry === true ? {} : options.retry) : baseFetch;
  const api: Client<paths, 'application/json'> = createClient<paths, 'application/json'>({ baseUrl: options.baseUrl, fetch });
  api.use(bearer(apiKey));
  const result = <T>(call: Promise<unknown>) => call as Promise<Result<T>>;
  // With retries on, every send carries a key, so that a retried send is never sent twice.
  const keyFor = (given?: string) => given ?? (options.retry ? globalThis.crypto.randomUUID() : undefined);

  const contacts = {
    list: (query: Query<'listContacts'> = {}) => result<Schemas['ContactList']>(api.GET('/contacts', { params: { query } })),
    /** Every contact, newest first, fetched a page at a time with `after` cursors. */
    async *listAll({ pageSize = 100 }: { pageSize?: number } = {}): AsyncGenerator<Schemas['Contact']> {
      let after: string | undefined;
      for (;;) {
        const { data, error } = await contacts.list({ limit: pageSize, ...(after && { after }) });
        if (error) throw new MailroomApiError(error);
        yield* data.data;
        if (!data.has_more || data.data.length === 0) return;
        after = data.data.at(-1)!.id;
      }
    },
    create: (body: Body<'createContact'>) => result<Schemas['ContactRef']>(api.POST('/contacts', { body })),
    get: (idOrEmail: string) => result<Schemas['Contact']>(api.GET('/contacts/{contact_id}', { params: { path: { contact_id: idOrEmail } } })),
    update: (idOrEmail: string, body: Body<'updateContact'>) =>
      result<Schemas['ContactRef']>(api.PATCH('/contacts/{contact_id}', { params: { path: { contact_id: idOrEmail } }, body })),
    remove: (idOrEmail: string) => result<Schemas['DeletedContact']>(api.DELETE('/contacts/{contact_id}', { params: { path: { contact_id: idOrEmail } } })),
  };

  function sendBatch(items: Body<'sendBatchEmails'>, options: { validation: 'permissive'; idempotencyKey?: string }): Promise<Result<PermissiveBatchResult>>;
  function sendBatch(items: Body<'sendBatchEmails'>, options?: { validation?: 'strict'; idempotencyKey?: string }): Promise<Result<StrictBatchResult>>;
  function sendBatch(items: Body<'sendBatchEmails'>, { validation = 'strict', idempotencyKey }: { validation?: 'strict' | 'permissive'; idempotencyKey?: string } = {}) {
    const key = keyFor(idempotencyKey);
    const header = { 'x-batch-validation': validation, ...(key && { 'Idempotency-Key': key }) };
    return result(api.POST('/emails/batch', { params: { header }, body: items }));
  }

  const emails = {
    send: (email: Body<'sendEmail'>, { idempotencyKey }: { idempotencyKey?: string } = {}) => {
      const key = keyFor(idempotencyKey);
      return result<Schemas['EmailId']>(api.POST('/emails', { params: { header: key ? { 'Idempotency-Key': key } : {} }, body: email }));
    },
    sendBatch,
    get: (id: string) => result<Schemas['Email']>(api.GET('/emails/{email_id}', { params: { path: { email_id: id } } })),
  };

  const broadcasts = {
    create: (body: Body<'createBroadcast'>) => result<Schemas['BroadcastRef']>(api.POST('/broadcasts', { body })),
    get: (id: string) => result<Schemas['Broadcast']>(api.GET('/broadcasts/{broadcast_id}', { params: { path: { broadcast_id: id } } })),
  };

  const templates = {
    create: (body: Body<'createTemplate'>) => result<Schemas['TemplateRef']>(api.POST('/templates', { body })),
    get: (idOrAlias: string) => result<Schemas['Template']>(api.GET('/templates/{template_id}', { params: { path: { template_id: idOrAlias } } })),
    publish: (idOrAlias: string) => result<Schemas['TemplateRef']>(api.POST('/templates/{template_id}/publish', { params: { path: { template_id: idOrAlias } } })),
  };

  const health = () => result<Schemas['Health']>(api.GET('/health'));

  // The raw openapi-fetch client (GET, POST, …) stays available beside the helpers.
  return Object.assign(api, { contacts, emails, broadcasts, templates, health });
}

function bearer(apiKey: string): Middleware {
  return {
    onRequest({ request }) {
      request.headers.set('Authorization', `Bearer ${apiKey}`);
      return request;
    },
  };
}
