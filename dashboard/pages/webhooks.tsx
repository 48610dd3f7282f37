// Webhooks: the endpoints that receive events; a new one (its signing secret shown once), turning
// one off and on, rotating its signing secret, deleting one. A webhook's events: where each delivery
// stands, the last answer and the payload of one, and a replay.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { MailroomError, MailroomSchemas } from '../api.ts';
import type { Route } from '../route.ts';
import { useClient } from '../session.tsx';
import { ActionButton, Checkbox, ErrorNote, FirstPageLink, Form, Link, Loading, PageHeading, Pager, ShownOnce, TextField, Unreadable, useAction, useCursor, useLoad, When } from '../ui.tsx';

type EventType = MailroomSchemas['WebhookEventType'];
// A Record, so that the compiler names any event type the contract adds and this page lacks.
const EVENT_TYPES: Record<EventType, true> = {
  'email.scheduled': true, 'email.sent': true, 'email.delivered': true, 'email.delivery_delayed': true, 'email.bounced': true,
  'email.complained': true, 'email.failed': true, 'email.suppressed': true, 'email.canceled': true, 'contact.created': true,
  'contact.updated': true, 'contact.deleted': true, 'domain.created': true, 'domain.updated': true, 'domain.deleted': true,
};
const ALL = Object.keys(EVENT_TYPES) as EventType[];

function Webhooks() {
  const client = useClient();
  const webhooks = useLoad(() => client.GET('/webhooks'), []);
  const [endpoint, setEndpoint] = useState('');
  const [events, setEvents] = useState<Set<EventType>>(new Set(['email.sent', 'email.delivered', 'email.bounced', 'email.complained']));
  /** A secret shown once, of a webhook just created or rotated: gone with its webhook. */
  type Shown = { id: string; endpoint: string; secret: string };
  const [secret, setSecret] = useState<Shown | null>(null);
  const [createError, setCreateError] = useState<MailroomError | null>(null);
  const [rowError, setRowError] = useState<MailroomError | null>(null);
  const [rotated, setRotated] = useState<Shown | null>(null);
  const path = (id: string) => ({ params: { path: { webhook_id: id } } });

  async function setStatus(webhook: MailroomSchemas['WebhookSummary'], status: MailroomSchemas['WebhookStatus']) {
    const { error } = await client.PATCH('/webhooks/{webhook_id}', { ...path(webhook.id), body: { status } });
    setRowError(error ?? null);
    webhooks.reload();
  }

  async function rotate(webhook: MailroomSchemas['WebhookSummary']) {
    if (!confirm(`Give the webhook to ${webhook.endpoint} a new signing secret? For a day, deliveries are signed with the old one as well.`)) return;
    const { data, error } = await client.POST('/webhooks/{webhook_id}/signing-secret/rotate', path(webhook.id));
    setRowError(error ?? null);
    setRotated(data ? { id: webhook.id, endpoint: webhook.endpoint, secret: data.signing_secret } : null);
    // The secret shown when it was created is the old one now: left on screen, it could be copied instead.
    if (data && secret?.id === webhook.id) setSecret(null);
  }

  async function remove(webhook: MailroomSchemas['WebhookSummary']) {
    if (!confirm(`Delete the webhook to ${webhook.endpoint}? Events it is still owed are dropped.`)) return;
    const { error } = await client.DELETE('/webhooks/{webhook_id}', path(webhook.id));
    setRowError(error ?? null);
    if (!error) {
      if (secret?.id === webhook.id) setSecret(null);
      if (rotated?.id === webhook.id) setRotated(null);
    }
    webhooks.reload();
  }

  return (
    <>
      <PageHeading title="Webhooks" />
      <Form
        class="panel"
        aria-labelledby="new-webhook"
        onSubmit={async () => {
          const { data, error } = await client.POST('/webhooks', { body: { endpoint: endpoint.trim(), events: ALL.filter((type) => events.has(type)) } });
          setCreateError(error ?? null);
          // A refused create keeps the last secret shown: it is shown only once.
          if (!data) return;
          setSecret({ id: data.id, endpoint: endpoint.trim(), secret: data.signing_secret });
          setEndpoint('');
          webhooks.reload();
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
        <ErrorNote error={createError} />
        <button type="submit">Create webhook</button>
        {secret && <ShownOnce label={`Signing secret of ${secret.endpoint}`} value={secret.secret} />}
      </Form>
      <ErrorNote error={webhooks.error ?? rowError} />
      {rotated && <ShownOnce label={`New signing secret of ${rotated.endpoint}`} value={rotated.secret} />}
      {webhooks.loading && !webhooks.data && <Loading what="webhooks" />}
      {webhooks.data && (
        <table>
          <thead>
            <tr>
              <th scope="col">Endpoint</th>
              <th scope="col">Events</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {webhooks.data.data.map((webhook) => (
              <tr key={webhook.id}>
                <td>{webhook.endpoint}</td>
                <td>{webhook.events.join(', ')}</td>
                <td>
                  <span class={`status status-${webhook.status}`}>{webhook.status}</span>
                  {webhook.status_reason && <p class="field-hint">{webhook.status_reason}</p>}
                </td>
                <td>
                  <When iso={webhook.created_at} />
                </td>
                <td>
                  <div class="actions">
                  <Link to={`/webhooks/${webhook.id}/events`}>
                    Events<span class="visually-hidden"> of {webhook.endpoint}</span>
                  </Link>
                  {webhook.status === 'enabled' ? (
                    <ActionButton class="secondary" onClick={() => setStatus(webhook, 'disabled')}>
                      Disable
                      <span class="visually-hidden"> {webhook.endpoint}</span>
                    </ActionButton>
                  ) : (
                    <ActionButton class="secondary" onClick={() => setStatus(webhook, 'enabled')}>
                      Enable
                      <span class="visually-hidden"> {webhook.endpoint}</span>
                    </ActionButton>
                  )}
                  <ActionButton class="secondary" onClick={() => rotate(webhook)}>
                    Rotate secret
                    <span class="visually-hidden"> of {webhook.endpoint}</span>
                  </ActionButton>
                  <ActionButton class="danger" onClick={() => remove(webhook)}>
                    Delete
                    <span class="visually-hidden"> {webhook.endpoint}</span>
                  </ActionButton>
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {webhooks.data?.data.length === 0 && <p>No webhooks yet.</p>}
    </>
  );
}

function WebhookEvents({ id }: Record<string, string>) {
  const client = useClient();
  const cursor = useCursor();
  const path = { webhook_id: id! };
  const webhook = useLoad(() => client.GET('/webhooks/{webhook_id}', { params: { path } }), [id]);
  const events = useLoad(() => client.GET('/webhooks/{webhook_id}/events', { params: { path, query: { limit: 20, ...cursor } } }), [id, cursor.after, cursor.before]);
  const [open, setOpen] = useState<string | null>(null);
  const shown = useLoad(async () => (open ? client.GET('/webhooks/{webhook_id}/events/{event_id}', { params: { path: { ...path, event_id: open } } }) : { data: undefined }), [open]);
  const [replayError, run] = useAction(() => {
    events.reload();
    shown.reload();
  });
  const [replayed, setReplayed] = useState<string | null>(null);
  // The event opens below the list, often past the window's bottom: taken to it, focus too.
  const panel = useRef<HTMLElement>(null);
  const opened = open !== null && shown.data?.id === open;
  useEffect(() => {
    if (!opened) return;
    panel.current?.scrollIntoView({ block: 'nearest' });
    panel.current?.focus({ preventScroll: true });
  }, [opened, open]);
  if (webhook.error) return <Unreadable title="Webhook events" back={['/webhooks', 'All webhooks']} error={webhook.error} />;
  const title = webhook.data ? `Events of ${webhook.data.endpoint}` : 'Webhook events';
  const event = shown.data;
  return (
    <>
      <PageHeading title={title} />
      <p>
        <Link to="/webhooks">All webhooks</Link>
      </p>
      <ErrorNote error={events.error ?? shown.error ?? replayError} />
      <FirstPageLink failed={Boolean(events.error)} path={`/webhooks/${id}/events`} />
      {replayed && (
        <p class="notice" role="status">
          Event <code>{replayed}</code> is posted again now.
        </p>
      )}
      {webhook.data?.status === 'disabled' && <p class="field-hint">This webhook is disabled: nothing is posted to it, and its events cannot be replayed.</p>}
      {events.loading && !events.data && <Loading what="events" />}
      {events.data && events.data.data.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">Type</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {events.data.data.map((listed) => (
              <tr key={listed.id}>
                <td>
                  <code>{listed.id}</code>
                </td>
                <td>{listed.type}</td>
                <td>
                  <span class={`status status-${listed.status}`}>{listed.status}</span>
                </td>
                <td>
                  <When iso={listed.created_at} />
                </td>
                <td>
                  <div class="actions">
                    <button type="button" class="secondary" aria-expanded={open === listed.id} onClick={() => setOpen(open === listed.id ? null : listed.id)}>
                      {open === listed.id ? 'Hide' : 'Show'}
                      <span class="visually-hidden"> {listed.id}</span>
                    </button>
                    {webhook.data?.status === 'enabled' && (
                      <ActionButton
                        class="secondary"
                        onClick={async () => {
                          setReplayed(null);
                          if (await run(() => client.POST('/webhooks/{webhook_id}/events/{event_id}/replay', { params: { path: { ...path, event_id: listed.id } } }))) setReplayed(listed.id);
                        }}
                      >
                        Replay<span class="visually-hidden"> {listed.id}</span>
                      </ActionButton>
                    )}
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {events.data?.data.length === 0 && <p>No events yet.</p>}
      {events.data && <Pager items={events.data.data} hasMore={events.data.has_more} path={`/webhooks/${id}/events`} />}
      {opened && event && (
        <section class="panel" aria-label={`Event ${event.id}`} ref={panel} tabIndex={-1}>
          <h2>
            {event.type} <code>{event.id}</code>
          </h2>
          <p>
            {event.attempts} {event.attempts === 1 ? 'attempt' : 'attempts'}
            {event.last_status_code !== null && `; the last answered ${event.last_status_code}`}
            {event.next_attempt_at && (
              <>
                ; next attempt <When iso={event.next_attempt_at} />
              </>
            )}
          </p>
          {event.last_error && <p class="field-hint">{event.last_error}</p>}
          <pre>{JSON.stringify(event.payload, null, 2)}</pre>
        </section>
      )}
    </>
  );
}

export const webhookRoutes: Route[] = [
  { path: '/webhooks', page: Webhooks },
  { path: '/webhooks/:id/events', page: WebhookEvents },
];
