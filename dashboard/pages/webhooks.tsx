// Webhooks: the endpoints that receive events; turning one off and on, rotating its signing secret,
// deleting one; a new one (its signing secret shown once). A webhook's events: ./webhookEvents.tsx.
import { useState } from 'preact/hooks';
import type { MailroomError, MailroomSchemas } from '../api.ts';
import { List, type RowAction } from '../list.tsx';
import { useLoad } from '../load.ts';
import type { Route } from '../route.ts';
import { useClient } from '../session.tsx';
import { ActionButton, Checkbox, ErrorNote, Form, Link, PageHeading, ShownOnce, TextField, When } from '../ui.tsx';
import { WebhookEvents } from './webhookEvents.tsx';

type EventType = MailroomSchemas['WebhookEventType'];
type Webhook = MailroomSchemas['WebhookSummary'];
// A Record, so that the compiler names any event type the contract adds and this page lacks.
const EVENT_TYPES: Record<EventType, true> = {
  'email.scheduled': true, 'email.sent': true, 'email.delivered': true, 'email.delivery_delayed': true, 'email.bounced': true,
  'email.complained': true, 'email.failed': true, 'email.suppressed': true, 'email.canceled': true, 'contact.created': true,
  'contact.updated': true, 'contact.deleted': true, 'domain.created': true, 'domain.updated': true, 'domain.deleted': true,
};
const ALL = Object.keys(EVENT_TYPES) as EventType[];

/** A secret shown once, of a webhook just created or rotated: gone with its webhook. */
type Shown = { id: string; endpoint: string; secret: string };

function Webhooks() {
  const client = useClient();
  const webhooks = useLoad(() => client.GET('/webhooks'), []);
  const [secret, setSecret] = useState<Shown | null>(null);
  const [rotated, setRotated] = useState<Shown | null>(null);
  const path = (id: string) => ({ params: { path: { webhook_id: id } } });

  const setStatus = (webhook: Webhook, status: MailroomSchemas['WebhookStatus'], run: RowAction) => run(() => client.PATCH('/webhooks/{webhook_id}', { ...path(webhook.id), body: { status } }));

  async function rotate(webhook: Webhook, run: RowAction) {
    if (!confirm(`Give the webhook to ${webhook.endpoint} a new signing secret? For a day, deliveries are signed with the old one as well.`)) return;
    await run(async () => {
      const { data, error } = await client.POST('/webhooks/{webhook_id}/signing-secret/rotate', path(webhook.id));
      setRotated(data ? { id: webhook.id, endpoint: webhook.endpoint, secret: data.signing_secret } : null);
      // The secret shown when it was created is the old one now: left on screen, it could be copied instead.
      if (data && secret?.id === webhook.id) setSecret(null);
      return { error };
    });
  }

  async function remove(webhook: Webhook) {
    const { error } = await client.DELETE('/webhooks/{webhook_id}', path(webhook.id));
    if (!error) {
      if (secret?.id === webhook.id) setSecret(null);
      if (rotated?.id === webhook.id) setRotated(null);
    }
    return { error };
  }

  return (
    <>
      <PageHeading title="Webhooks" />
      {rotated && <ShownOnce label={`New signing secret of ${rotated.endpoint}`} value={rotated.secret} />}
      <List
        what="webhooks"
        loaded={webhooks}
        empty="No webhooks yet."
        columns={[
          { heading: 'Endpoint', cell: (webhook) => webhook.endpoint },
          { heading: 'Events', cell: (webhook) => webhook.events.join(', ') },
          {
            heading: 'Status',
            cell: (webhook) => (
              <>
                <span class={`status status-${webhook.status}`}>{webhook.status}</span>
                {webhook.status_reason && <p class="field-hint">{webhook.status_reason}</p>}
              </>
            ),
          },
          { heading: 'Created', cell: (webhook) => <When iso={webhook.created_at} /> },
        ]}
        actions={(webhook, run) => (
          <>
            <Link to={`/webhooks/${webhook.id}/events`}>
              Events<span class="visually-hidden"> of {webhook.endpoint}</span>
            </Link>
            <ActionButton class="secondary" onClick={() => setStatus(webhook, webhook.status === 'enabled' ? 'disabled' : 'enabled', run)}>
              {webhook.status === 'enabled' ? 'Disable' : 'Enable'}
              <span class="visually-hidden"> {webhook.endpoint}</span>
            </ActionButton>
            <ActionButton class="secondary" onClick={() => rotate(webhook, run)}>
              Rotate secret
              <span class="visually-hidden"> of {webhook.endpoint}</span>
            </ActionButton>
          </>
        )}
        remove={{
          verb: 'Delete',
          name: (webhook) => webhook.endpoint,
          confirm: (webhook) => `Delete the webhook to ${webhook.endpoint}? Events it is still owed are dropped.`,
          call: remove,
        }}
      />
      <NewWebhook
        shown={secret}
        onCreated={(shown) => {
          setSecret(shown);
          webhooks.reload();
        }}
      />
    </>
  );
}

/** The form for a new webhook, with the signing secret of the last one made, shown once. */
function NewWebhook({ shown, onCreated }: { shown: Shown | null; onCreated: (shown: Shown) => void }) {
  const client = useClient();
  const [endpoint, setEndpoint] = useState('');
  const [events, setEvents] = useState<Set<EventType>>(new Set(['email.sent', 'email.delivered', 'email.bounced', 'email.complained']));
  const [error, setError] = useState<MailroomError | null>(null);
  return (
    <Form
      class="panel"
      aria-labelledby="new-webhook"
      onSubmit={async () => {
        const { data, error } = await client.POST('/webhooks', { body: { endpoint: endpoint.trim(), events: ALL.filter((type) => events.has(type)) } });
        setError(error ?? null);
        // A refused create keeps the last secret shown: it is shown only once.
        if (!data) return;
        onCreated({ id: data.id, endpoint: endpoint.trim(), secret: data.signing_secret });
        setEndpoint('');
      }}
    >
      <h2 id="new-webhook">New webhook</h2>
      <TextField label="Endpoint URL" type="url" value={endpoint} onValue={setEndpoint} required placeholder="https://hooks.example.com/mailroom" />
      <fieldset>
        <legend>Events</legend>
        <div class="checks">
          {ALL.map((type) => (
            <Checkbox
              key={type}
              label={type}
              checked={events.has(type)}
              onValue={(checked) => {
                const next = new Set(events);
                if (checked) next.add(type);
                else next.delete(type);
                setEvents(next);
              }}
            />
          ))}
        </div>
      </fieldset>
      <ErrorNote error={error} />
      <button type="submit">Create webhook</button>
      {shown && <ShownOnce label={`Signing secret of ${shown.endpoint}`} value={shown.secret} />}
    </Form>
  );
}

export const webhookRoutes: Route[] = [
  { path: '/webhooks', page: Webhooks },
  { path: '/webhooks/:id/events', page: WebhookEvents },
];
