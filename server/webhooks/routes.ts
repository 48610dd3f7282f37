// Webhooks: create, list, retrieve, update, delete, and rotate a signing secret, under /webhooks; and
// each webhook's events (its deliveries, by their svix-id): list, retrieve, replay. What they receive,
// and how, is the outbox worker's business (server/webhooks/dispatch.ts).
import { randomUUID } from 'node:crypto';
import type { OperationHandler, Schemas } from '../api.ts';
import { invalid, notFound } from '../http/errors.ts';
import { cursorOf, listing } from '../http/paging.ts';
import type { StreamedLists } from '../http/streamedList.ts';
import type { Store } from '../store/index.ts';
import type { LoggedDelivery } from '../store/webhookDeliveries.ts';
import type { WebhookRecord } from '../store/webhooks.ts';
import type { WebhookOptions } from './dispatch.ts';
import { endpointProblem } from './endpoint.ts';
import { payloadOf } from './payload.ts';
import { newSigningSecret, PREVIOUS_SECRET_SIGNS_MS } from './signature.ts';
import type { Handlers } from '../http/operationRouter.ts';

/** `lists` writes the list asked for without `limit`. */
export function webhookHandlers(store: Store, options: Pick<WebhookOptions, 'allowPrivate'>, lists: StreamedLists): Handlers {
  const { webhooks, webhookDeliveries: deliveries } = store;
  const streamWebhooks = lists.of('WebhookList', toSummary);

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
    const { limit } = req.query;
    const cursor = cursorOf(req.query);
    if (limit === undefined) return listing('webhook', () => streamWebhooks(res, webhooks.stream(cursor)));
    const page = await listing('webhook', () => webhooks.page(limit, cursor));
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

  const listWebhookEvents: OperationHandler<'listWebhookEvents'> = async (req, res) => {
    const { webhook_id } = req.params;
    const cursor = cursorOf(req.query);
    if (!(await webhooks.find(webhook_id))) throw notFound('Webhook');
    // `limit` is never missing: the request check fills in the contract's default (deliveries can number millions, so there is no whole list).
    const page = await listing('event of this webhook', () => deliveries.page(webhook_id, req.query.limit!, cursor));
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map(({ id, type, created_at, ...delivery }) => ({ id, type, created_at, status: statusOf(delivery) })) });
  };

  const getWebhookEvent: OperationHandler<'getWebhookEvent'> = async (req, res) => {
    const { webhook_id, event_id } = req.params;
    const delivery = await deliveries.find(webhook_id, event_id);
    if (!delivery) throw notFound('Webhook event');
    const context = (await deliveries.contextOf([delivery.id])).get(delivery.id)!;
    const payload = payloadOf(context);
    if ('missing' in payload) throw new Error(`webhook event ${delivery.id}: ${payload.missing}`);
    const status = statusOf(delivery);
    res.json({
      object: 'webhook_event',
      id: delivery.id,
      type: payload.type,
      created_at: delivery.created_at,
      status,
      next_attempt_at: status === 'pending' || status === 'attempting' ? delivery.next_attempt_at : null,
      attempts: delivery.attempts,
      last_status_code: delivery.last_status,
      last_error: delivery.last_error,
      payload: payload as Schemas['WebhookEventDetail']['payload'],
    });
  };

  const replayWebhookEvent: OperationHandler<'replayWebhookEvent'> = async (req, res) => {
    const { webhook_id, event_id } = req.params;
    const webhook = await webhooks.find(webhook_id);
    if (!webhook) throw notFound('Webhook');
    // The outbox drops what a disabled webhook is owed: a replay would vanish unposted.
    if (webhook.status !== 'enabled') throw invalid('The webhook is disabled; enable it to replay its events.');
    if (!(await deliveries.replay(webhook_id, event_id, new Date()))) throw notFound('Webhook event');
    res.json({ object: 'webhook_event', id: event_id });
  };

  return { createWebhook, listWebhooks, getWebhook, updateWebhook, deleteWebhook, rotateWebhookSigningSecret, listWebhookEvents, getWebhookEvent, replayWebhookEvent };
}

/** Where a delivery stands, in Resend's words: `attempts` counts claims, so a post under way is `attempting`. */
function statusOf({ state, attempts }: Pick<LoggedDelivery, 'state' | 'attempts'>): Schemas['WebhookEventStatus'] {
  if (state === 'delivered') return 'success';
  if (state === 'failed') return 'failed';
  return attempts === 0 ? 'pending' : 'attempting';
}

function toSummary(record: WebhookRecord): Schemas['WebhookSummary'] {
  const { id, endpoint, events, status, status_reason, created_at } = record;
  return { object: 'webhook', id, endpoint, events: JSON.parse(events) as Schemas['WebhookEventTypes'], status, status_reason, created_at };
}
