// One email: its facts and its events as a timeline, beside the message as it went out
// (./emailMessage.tsx); a scheduled one can be canceled.
import { useState } from 'preact/hooks';
import type { MailroomError, MailroomSchemas } from '../api.ts';
import { useLoad } from '../load.ts';
import { useClient } from '../session.tsx';
import { ActionButton, ErrorNote, Link, Loading, PageHeading, When } from '../ui.tsx';
import { Attachments, Headers, Message, RawMessage, useRawMessage } from './emailMessage.tsx';
import { EmailStatus } from './emailStatus.tsx';

type Email = MailroomSchemas['Email'];

export function EmailPage({ id }: Record<string, string>) {
  const client = useClient();
  const email = useLoad(() => client.emails.get(id!), [id]);
  const events = useLoad(() => client.GET('/emails/{email_id}/events', { params: { path: { email_id: id! } } }), [id]);
  const e = email.data;
  const raw = useRawMessage(id!, e && e.message_id !== null);
  const [canceling, setCanceling] = useState<MailroomError | null>(null);
  return (
    <>
      <PageHeading title={e ? e.subject || '(no subject)' : 'Email'}>
        {e?.last_event === 'scheduled' && (
          <ActionButton
            class="danger"
            onClick={async () => {
              if (!confirm('Cancel this email? It will not be sent.')) return;
              const { error } = await client.POST('/emails/{email_id}/cancel', { params: { path: { email_id: e.id } } });
              setCanceling(error ?? null);
              email.reload();
              events.reload();
            }}
          >
            Cancel email
          </ActionButton>
        )}
        <button type="button" class="secondary" onClick={() => (email.reload(), events.reload())}>
          Refresh
        </button>
      </PageHeading>
      <p>
        <Link to="/emails">All emails</Link>
      </p>
      <ErrorNote error={canceling ?? email.error ?? events.error} />
      {email.loading && !e && <Loading what="the email" />}
      {e && (
        <div class="columns">
          <div>
            <Facts email={e} />
            <section class="panel" aria-labelledby="timeline">
              <h2 id="timeline">Events</h2>
              {events.loading && !events.data && <Loading what="events" />}
              <Timeline events={events.data?.data ?? []} />
            </section>
            <Headers raw={raw} sent={e.message_id !== null} />
          </div>
          <div>
            <Message email={e} />
            <Attachments id={e.id} />
            <RawMessage raw={raw} />
          </div>
        </div>
      )}
    </>
  );
}

/** Who sent it to whom, when, and as part of which broadcast. */
function Facts({ email: e }: { email: Email }) {
  const addresses = (label: string, list: string[] | null | undefined) =>
    list && (
      <>
        <dt>{label}</dt>
        <dd>{list.join(', ')}</dd>
      </>
    );
  return (
    <dl class="facts panel">
      <dt>Status</dt>
      <dd>
        <EmailStatus status={e.last_event} />
      </dd>
      <dt>From</dt>
      <dd>{e.from}</dd>
      {addresses('To', e.to)}
      {addresses('Cc', e.cc)}
      {addresses('Bcc', e.bcc)}
      {addresses('Reply-to', e.reply_to)}
      <dt>Created</dt>
      <dd>
        <When iso={e.created_at} />
      </dd>
      {e.scheduled_at && (
        <>
          <dt>Scheduled for</dt>
          <dd>
            <When iso={e.scheduled_at} />
          </dd>
        </>
      )}
      {e.broadcast_id && (
        <>
          <dt>Broadcast</dt>
          <dd>
            <Link to={`/broadcasts/${e.broadcast_id}`}>{e.broadcast_id}</Link>
          </dd>
        </>
      )}
      <dt>Id</dt>
      <dd>{e.id}</dd>
    </dl>
  );
}

/** The email's events, oldest first, each with what it carries. */
function Timeline({ events }: { events: MailroomSchemas['EmailTimelineEvent'][] }) {
  return (
    <ol class="timeline">
      {events.map((event) => (
        <li key={event.id}>
          <strong>{event.type}</strong> <When iso={event.created_at} />
          <EventDetail data={event.data} />
        </li>
      ))}
    </ol>
  );
}

/** An event's detail, whatever it carries: a bounce's type and diagnostic, a reason, and so on. */
function EventDetail({ data }: { data: MailroomSchemas['EmailTimelineEventData'] }) {
  const lines = Object.entries(data).flatMap(([key, value]) =>
    value !== null && typeof value === 'object' ? Object.entries(value).map(([part, detail]) => `${key} ${part}: ${String(detail)}`) : [`${key}: ${String(value)}`],
  );
  if (lines.length === 0) return null;
  return (
    <ul class="field-hint">
      {lines.map((line) => (
        <li key={line}>{line}</li>
      ))}
    </ul>
  );
}
