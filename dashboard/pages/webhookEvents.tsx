// A webhook's events: where each delivery stands, the last answer and the payload of one, and a
// replay while the webhook is enabled.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { MailroomSchemas } from '../api.ts';
import { List, useCursor } from '../list.tsx';
import { useLoad } from '../load.ts';
import { useClient } from '../session.tsx';
import { ActionButton, Link, PageHeading, Unreadable, When } from '../ui.tsx';

export function WebhookEvents({ id }: Record<string, string>) {
  const client = useClient();
  const cursor = useCursor();
  const path = { webhook_id: id! };
  const webhook = useLoad(() => client.GET('/webhooks/{webhook_id}', { params: { path } }), [id]);
  const events = useLoad(() => client.GET('/webhooks/{webhook_id}/events', { params: { path, query: { limit: 20, ...cursor } } }), [id, cursor.after, cursor.before]);
  const [open, setOpen] = useState<string | null>(null);
  const shown = useLoad(async () => (open ? client.GET('/webhooks/{webhook_id}/events/{event_id}', { params: { path: { ...path, event_id: open } } }) : { data: undefined }), [open]);
  const [replayed, setReplayed] = useState<string | null>(null);
  if (webhook.error) return <Unreadable title="Webhook events" back={['/webhooks', 'All webhooks']} error={webhook.error} />;
  const enabled = webhook.data?.status === 'enabled';
  return (
    <>
      <PageHeading title={webhook.data ? `Events of ${webhook.data.endpoint}` : 'Webhook events'} />
      <p>
        <Link to="/webhooks">All webhooks</Link>
      </p>
      {replayed && (
        <p class="notice" role="status">
          Event <code>{replayed}</code> is posted again now.
        </p>
      )}
      {webhook.data?.status === 'disabled' && <p class="field-hint">This webhook is disabled: nothing is posted to it, and its events cannot be replayed.</p>}
      <List
        what="events"
        loaded={events}
        error={shown.error}
        paged={{ path: `/webhooks/${id}/events` }}
        empty="No events yet."
        columns={[
          { heading: 'Event', cell: (listed) => <code>{listed.id}</code> },
          { heading: 'Type', cell: (listed) => listed.type },
          { heading: 'Status', cell: (listed) => <span class={`status status-${listed.status}`}>{listed.status}</span> },
          { heading: 'Created', cell: (listed) => <When iso={listed.created_at} /> },
        ]}
        actions={(listed, run) => (
          <>
            <button type="button" class="secondary" aria-expanded={open === listed.id} onClick={() => setOpen(open === listed.id ? null : listed.id)}>
              {open === listed.id ? 'Hide' : 'Show'}
              <span class="visually-hidden"> {listed.id}</span>
            </button>
            {enabled && (
              <ActionButton
                class="secondary"
                onClick={async () => {
                  setReplayed(null);
                  const replay = () => client.POST('/webhooks/{webhook_id}/events/{event_id}/replay', { params: { path: { ...path, event_id: listed.id } } });
                  if (await run(replay)) setReplayed(listed.id);
                  shown.reload();
                }}
              >
                Replay<span class="visually-hidden"> {listed.id}</span>
              </ActionButton>
            )}
          </>
        )}
      />
      {open !== null && shown.data?.id === open && <Delivery event={shown.data} />}
    </>
  );
}

/**
 * One event's deliveries so far and its payload. It opens below the list, often past the window's
 * bottom: taken to it, focus too.
 */
function Delivery({ event }: { event: MailroomSchemas['WebhookEventDetail'] }) {
  const panel = useRef<HTMLElement>(null);
  useEffect(() => {
    panel.current?.scrollIntoView({ block: 'nearest' });
    panel.current?.focus({ preventScroll: true });
  }, [event.id]);
  return (
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
  );
}
