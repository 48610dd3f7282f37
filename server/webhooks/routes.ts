// Webhooks: create, list, retrieve, update, delete, and rotate a signing secret, under /webhooks. What
// they receive, and how, is the outbox worker's business (server/webhooks/dispatch.ts).
import { randomUUID } from 'node:crypto';
import type { OperationHandler, Schemas } from '../api.ts';
import { invalid, notFound } from '../errors.ts';
import { cursorOf, listing } from '../paging.ts';
import type { Store } from '../store/index.ts';
import type { WebhookRecord } from '../store/webhooks.ts';
import { endpointProblem } from './endpoint.ts';
import { newSigningSecret, PREVIOUS_SECRET_SIGNS_MS } from './signature.ts';
import type { Handlers } from '../operationRouter.ts';

export function webhookHandlers(store: Store, options: { allowPrivate: boolean }): Handlers {
  const webhooks = store.webhooks;

  /** Refuses an endpoint the server would not post to, naming the rule it breaks. */
  const checkEndpoint = (endpoint: string) => {
    const problem = endpointProblem(endpoint, options.allowPrivate);
    if (problem) throw invalid(problem);
  };

  const createWebhook: OperationHandler<'createWebhook'> = async (req, res) => {
    const { endpoint, events } = req.body;
    checkEndpoint(endpoint);
    const at = new Date().toISOString();
    const record: WebhookRecord = {
      id: randomUUID(),
      endpoint,
      events: JSON.stringify(events),
      signing_secret: newSigningSecret(),
      previous_signing_secret: null,
      previous_secret_expires_at: null,
      status: 'enabled',
      status_reason: null,
      created_at: at,
      updated_at: at,
    };
    await webhooks.insert(record);
    res.status(201).json({ object: 'webhook', id: record.id, signing_secret: record.signing_secret });
  };

  const listWebhooks: OperationHandler<'listWebhooks'> = async (req, res) => {
    const page = await listing('webhook', () => webhooks.list(req.query.limit, cursorOf(req.query)));
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map(toSummary) });
  };

  const getWebhook: OperationHandler<'getWebhook'> = async (req, res) => {
    const record = await webhooks.find(req.params.webhook_id);
    if (!record) throw notFound('Webhook');
    res.json({ ...toSummary(record), signing_secret: record.signing_secret });
  };

  const updateWebhook: OperationHandler<'updateWebhook'> = async (req, res) => {
    const { endpoint, events, status } = req.body;
    if (endpoint !== undefined) checkEndpoint(endpoint);
    const record = await webhooks.update(
      req.params.webhook_id,
      (current) => ({
        ...(endpoint !== undefined && { endpoint }),
        ...(events !== undefined && { events: JSON.stringify(events) }),
        ...(status !== undefined && { status }),
        // Whatever made the server disable it is over once it is enabled again, or disabled by hand.
        ...(status !== undefined && status !== current.status && { status_reason: null }),
      }),
      new Date(),
    );
    if (!record) throw notFound('Webhook');
    res.json({ object: 'webhook', id: record.id });
  };

  const deleteWebhook: OperationHandler<'deleteWebhook'> = async (req, res) => {
    const { webhook_id } = req.params;
    if (!(await webhooks.delete(webhook_id))) throw notFound('Webhook');
    res.json({ object: 'webhook', id: webhook_id, deleted: true });
  };

  const rotateWebhookSigningSecret: OperationHandler<'rotateWebhookSigningSecret'> = async (req, res) => {
    const now = new Date();
    const record = await webhooks.rotateSecret(req.params.webhook_id, newSigningSecret(), new Date(now.getTime() + PREVIOUS_SECRET_SIGNS_MS), now);
    if (!record) throw notFound('Webhook');
    res.json({ object: 'webhook', id: record.id, signing_secret: record.signing_secret });
  };

  return { createWebhook, listWebhooks, getWebhook, updateWebhook, deleteWebhook, rotateWebhookSigningSecret };
}

function toSummary(record: WebhookRecord): Schemas['WebhookSummary'] {
  const { id, endpoint, events, status, status_reason, created_at } = record;
  return { object: 'webhook', id, endpoint, events: JSON.parse(events) as Schemas['WebhookEventTypes'], status, status_reason, created_at };
}
