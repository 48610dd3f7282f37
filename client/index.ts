// The typed Mailroom client: openapi-fetch over the paths generated from openapi.yaml, plus the helpers
// people expect (resource methods, walking every contact, retries). No Node-only imports: it runs in
// browsers too.
// Relative imports say .js, not .ts: the published modules and declarations keep them as written.
import createClient, { type Client, type FetchResponse, type Middleware, type RequestBodyOption } from 'openapi-fetch';
import type { components, operations, paths } from './contract.js';
import { retryingFetch, type RetryOptions } from './retry.js';

export type { components, operations, paths, RetryOptions };
export type MailroomSchemas = components['schemas'];
export type MailroomError = components['schemas']['Error'];

type OperationId = keyof operations;
// As openapi-fetch takes it: a field the contract allows only as `null` is left out (it reads such a field as read-only).
type Body<Op extends OperationId> = NonNullable<RequestBodyOption<operations[Op]>['body']>;
type Query<Op extends OperationId> = NonNullable<operations[Op]['parameters']['query']>;

/** The JSON body of an operation's 2xx response, as openapi-fetch types it. */
export type OperationData<Op extends OperationId> = NonNullable<FetchResponse<operations[Op], {}, 'application/json'>['data']>;

/** What every call returns: openapi-fetch's result, with `error` the contract's Error. */
export type Result<T> = { data: T; error?: undefined; response: Response } | { data?: undefined; error: MailroomError; response: Response };

/**
 * What the helper for one operation returns. Helpers return openapi-fetch's own inferred result under
 * this annotation, with no cast: naming another operation's result is a compile error.
 */
export type OperationResult<Op extends OperationId> = Result<OperationData<Op>>;

export type StrictBatchResult = Omit<OperationData<'sendBatchEmails'>, 'errors'>;
export type PermissiveBatchResult = OperationData<'sendBatchEmails'> & { errors: NonNullable<OperationData<'sendBatchEmails'>['errors']> };

export interface MailroomClientOptions {
  /** Defaults to the MAILROOM_API_KEY environment variable where there is one. */
  apiKey?: string | undefined;
  baseUrl: string;
  /** A fetch implementation; defaults to the global one. */
  fetch?: typeof globalThis.fetch | undefined;
  /** Retry 429s, and 5xx or network errors where repeating is safe; sends then carry an Idempotency-Key. */
  retry?: boolean | RetryOptions | undefined;
}

/** Per-send options. */
export interface SendOptions {
  /** A retry with the same key and body within 24 hours gets the first answer; nothing is sent twice. */
  idempotencyKey?: string | undefined;
}

export type MailroomClient = ReturnType<typeof createMailroomClient>;

/** A failed call, thrown by the helpers that cannot return an error (the contact iterator). */
export class MailroomApiError extends Error {
  constructor(readonly error: MailroomError) {
    super(`${error.name}: ${error.message}`);
  }
}

export function createMailroomClient(options: MailroomClientOptions) {
  const apiKey = options.apiKey ?? (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.['MAILROOM_API_KEY'];
  if (!apiKey) throw new Error('Mailroom: no API key. Pass `apiKey`, or set MAILROOM_API_KEY.');
  const baseFetch = options.fetch ?? globalThis.fetch;
  const fetch = options.retry ? retryingFetch(baseFetch, options.retry === true ? {} : options.retry) : baseFetch;
  const api: Client<paths, 'application/json'> = createClient<paths, 'application/json'>({ baseUrl: options.baseUrl, fetch });
  api.use(bearer(apiKey), errorInContractShape);
  // With retries on, every send carries a key, so that a retried send is never sent twice.
  const keyFor = (given?: string) => given ?? (options.retry ? globalThis.crypto.randomUUID() : undefined);
  const idempotency = (given?: string) => {
    const key = keyFor(given);
    return key ? { 'Idempotency-Key': key } : {};
  };

  // Each helper's return type names its operation; the value is openapi-fetch's inferred result, uncast.
  const contacts = {
    list: (query: Query<'listContacts'> = {}): Promise<OperationResult<'listContacts'>> => api.GET('/contacts', { params: { query } }),
    /** Every contact, newest first, fetched a page at a time with `after` cursors. */
    async *listAll({ pageSize = 100 }: { pageSize?: number | undefined } = {}): AsyncGenerator<OperationData<'getContact'>> {
      let after: string | undefined;
      for (;;) {
        const { data, error } = await contacts.list({ limit: pageSize, ...(after && { after }) });
        if (error) throw new MailroomApiError(error);
        yield* data.data;
        if (!data.has_more || data.data.length === 0) return;
        after = data.data.at(-1)!.id;
      }
    },
    create: (body: Body<'createContact'>): Promise<OperationResult<'createContact'>> => api.POST('/contacts', { body }),
    get: (idOrEmail: string): Promise<OperationResult<'getContact'>> =>
      api.GET('/contacts/{contact_id}', { params: { path: { contact_id: idOrEmail } } }),
    update: (idOrEmail: string, body: Body<'updateContact'>): Promise<OperationResult<'updateContact'>> =>
      api.PATCH('/contacts/{contact_id}', { params: { path: { contact_id: idOrEmail } }, body }),
    remove: (idOrEmail: string): Promise<OperationResult<'deleteContact'>> =>
      api.DELETE('/contacts/{contact_id}', { params: { path: { contact_id: idOrEmail } } }),
  };

  // The contract states one result for both modes; `x-batch-validation` decides whether `errors` is there.
  function sendBatch(items: Body<'sendBatchEmails'>, options: SendOptions & { validation: 'permissive' }): Promise<Result<PermissiveBatchResult>>;
  function sendBatch(items: Body<'sendBatchEmails'>, options?: SendOptions & { validation?: 'strict' | undefined }): Promise<Result<StrictBatchResult>>;
  function sendBatch(
    items: Body<'sendBatchEmails'>,
    { validation = 'strict', idempotencyKey }: SendOptions & { validation?: 'strict' | 'permissive' | undefined } = {},
  ): Promise<OperationResult<'sendBatchEmails'>> {
    return api.POST('/emails/batch', { params: { header: { 'x-batch-validation': validation, ...idempotency(idempotencyKey) } }, body: items });
  }

  const emails = {
    send: (email: Body<'sendEmail'>, { idempotencyKey }: SendOptions = {}): Promise<OperationResult<'sendEmail'>> =>
      api.POST('/emails', { params: { header: idempotency(idempotencyKey) }, body: email }),
    sendBatch,
    get: (id: string): Promise<OperationResult<'getEmail'>> => api.GET('/emails/{email_id}', { params: { path: { email_id: id } } }),
  };

  const broadcasts = {
    create: (body: Body<'createBroadcast'>): Promise<OperationResult<'createBroadcast'>> => api.POST('/broadcasts', { body }),
    get: (id: string): Promise<OperationResult<'getBroadcast'>> =>
      api.GET('/broadcasts/{broadcast_id}', { params: { path: { broadcast_id: id } } }),
  };

  const templates = {
    create: (body: Body<'createTemplate'>): Promise<OperationResult<'createTemplate'>> => api.POST('/templates', { body }),
    get: (idOrAlias: string): Promise<OperationResult<'getTemplate'>> =>
      api.GET('/templates/{template_id}', { params: { path: { template_id: idOrAlias } } }),
    publish: (idOrAlias: string): Promise<OperationResult<'publishTemplate'>> =>
      api.POST('/templates/{template_id}/publish', { params: { path: { template_id: idOrAlias } } }),
  };

  const health = (): Promise<OperationResult<'getHealth'>> => api.GET('/health');

  // The raw openapi-fetch client (GET, POST, …) stays available beside the helpers.
  return Object.assign(api, { contacts, emails, broadcasts, templates, health });
}

/**
 * A refusal whose body is not the contract's error (a proxy's HTML page for a 502, an empty 500) is
 * answered as one that says what happened, so that `error` is always a MailroomError, with a message to
 * show. Retry-After is kept.
 */
const errorInContractShape: Middleware = {
  async onResponse({ response }) {
    if (response.ok) return undefined;
    const body = (await response.clone().json().catch(() => null)) as Partial<MailroomError> | null;
    if (typeof body?.name === 'string' && typeof body.message === 'string' && body.message !== '') return undefined;
    const status = `${response.status}${response.statusText ? ` ${response.statusText}` : ''}`;
    const error: MailroomError = {
      statusCode: response.status,
      name: NAMED_STATUS[response.status] ?? (response.status >= 500 ? 'service_unavailable' : 'validation_error'),
      message: `The server answered ${status}, without saying why.${response.status >= 500 ? ' Try again in a moment.' : ''}`,
    };
    const retryAfter = response.headers.get('retry-after');
    return Response.json(error, { status: response.status, statusText: response.statusText, headers: retryAfter ? { 'retry-after': retryAfter } : {} });
  },
};

/** The error names of the statuses a proxy in front of the server answers with a page of its own. */
const NAMED_STATUS: Partial<Record<number, MailroomError['name']>> = {
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limit_exceeded',
  500: 'internal_server_error',
};

function bearer(apiKey: string): Middleware {
  return {
    onRequest({ request }) {
      request.headers.set('Authorization', `Bearer ${apiKey}`);
      return request;
    },
  };
}
