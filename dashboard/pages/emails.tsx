// The email log, newest first, filtered by status; and one email: its facts, its events as a
// timeline, its message (HTML only in a sandboxed frame), its attachments, and in capture mode its raw
// MIME; a scheduled one can be canceled.
import { useEffect, useState } from 'preact/hooks';
import type { MailroomError, MailroomSchemas } from '../api.ts';
import type { Route } from '../route.ts';
import { navigate, useLocation } from '../router.tsx';
import { useClient } from '../session.tsx';
import { ActionButton, ErrorNote, FirstPageLink, Form, Link, Loading, MessageFrame, PageHeading, Pager, Select, useCursor, useLoad, When } from '../ui.tsx';

type Status = MailroomSchemas['EmailEvent'];
// A Record, so that the compiler names any status the contract adds and this page lacks.
const STATUS_LABELS: Record<Status, string> = {
  queued: 'Queued',
  scheduled: 'Scheduled',
  sent: 'Sent',
  delivered: 'Delivered',
  delivery_delayed: 'Delivery delayed',
  bounced: 'Bounced',
  complained: 'Complained',
  failed: 'Failed',
  suppressed: 'Suppressed',
  canceled: 'Canceled',
};
const isStatus = (value: string | null): value is Status => value !== null && Object.hasOwn(STATUS_LABELS, value);

function EmailLog() {
  const client = useClient();
  const cursor = useCursor();
  const { query } = useLocation();
  const status = query.get('last_event');
  const filter: { last_event?: Status } = isStatus(status) ? { last_event: status } : {};
  const list = useLoad(() => client.GET('/emails', { params: { query: { limit: 50, ...filter, ...cursor } } }), [status, cursor.after, cursor.before]);
  return (
    <>
      <PageHeading title="Emails" />
      <Form class="panel row" aria-label="Filter">
        <Select
          label="Status"
          value={filter.last_event ?? ''}
          onValue={(value) => navigate(value ? `/emails?${new URLSearchParams({ last_event: value })}` : '/emails')}
          options={[{ value: '', label: 'All' }, ...Object.entries(STATUS_LABELS).map(([value, label]) => ({ value, label }))]}
        />
      </Form>
      <ErrorNote error={list.error} />
      <FirstPageLink failed={Boolean(list.error)} path="/emails" extra={filter.last_event ? { last_event: filter.last_event } : {}} />
      {list.loading && <Loading what="emails" />}
      {list.data && (
        <>
          <table>
            <thead>
              <tr>
                <th scope="col">To</th>
                <th scope="col">Subject</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {list.data.data.map((email) => (
                <tr key={email.id}>
                  <td>{email.to.join(', ')}</td>
                  <td>
                    <Link to={`/emails/${email.id}`}>{email.subject || '(no subject)'}</Link>
                  </td>
                  <td>
                    <span class={`status status-${email.last_event}`}>{STATUS_LABELS[email.last_event]}</span>
                  </td>
                  <td>
                    <When iso={email.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {list.data.data.length === 0 && <p>No emails here.</p>}
          <Pager items={list.data.data} hasMore={list.data.has_more} path="/emails" extra={filter.last_event ? { last_event: filter.last_event } : {}} />
        </>
      )}
    </>
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

/**
 * The raw message and its header block, kept only in capture mode. Asked for only once the email has
 * gone out (it has a Message-ID): before, the answer is a 404, which the browser logs as an error.
 */
function useRawMessage(id: string, sent: boolean | undefined) {
  const client = useClient();
  const [raw, setRaw] = useState<string | null | undefined>(undefined);
  useEffect(() => {
    if (sent === undefined) return;
    if (!sent) return void setRaw(null);
    let current = true;
    client.GET('/emails/{email_id}/raw', { params: { path: { email_id: id } }, parseAs: 'text' }).then(
      ({ data }) => current && setRaw(typeof data === 'string' ? data : null),
      () => current && setRaw(null),
    );
    return () => {
      current = false;
    };
  }, [id, sent]);
  return raw;
}

function EmailPage({ id }: Record<string, string>) {
  const client = useClient();
  const email = useLoad(() => client.emails.get(id!), [id]);
  const events = useLoad(() => client.GET('/emails/{email_id}/events', { params: { path: { email_id: id! } } }), [id]);
  const attachments = useLoad(() => client.GET('/emails/{email_id}/attachments', { params: { path: { email_id: id! } } }), [id]);
  const e = email.data;
  const raw = useRawMessage(id!, e && e.message_id !== null);
  const [canceling, setCanceling] = useState<MailroomError | null>(null);
  const headers = raw ? raw.slice(0, raw.search(/\r?\n\r?\n/) >>> 0) : null;
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
            <dl class="facts panel">
              <dt>Status</dt>
              <dd>
                <span class={`status status-${e.last_event}`}>{STATUS_LABELS[e.last_event]}</span>
              </dd>
              <dt>From</dt>
              <dd>{e.from}</dd>
              <dt>To</dt>
              <dd>{e.to.join(', ')}</dd>
              {e.cc && (
                <>
                  <dt>Cc</dt>
                  <dd>{e.cc.join(', ')}</dd>
                </>
              )}
              {e.bcc && (
                <>
                  <dt>Bcc</dt>
                  <dd>{e.bcc.join(', ')}</dd>
                </>
              )}
              {e.reply_to && (
                <>
                  <dt>Reply-to</dt>
                  <dd>{e.reply_to.join(', ')}</dd>
                </>
              )}
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
            <section class="panel" aria-labelledby="timeline">
              <h2 id="timeline">Events</h2>
              {events.loading && !events.data && <Loading what="events" />}
              <ol class="timeline">
                {events.data?.data.map((event) => (
                  <li key={event.id}>
                    <strong>{event.type}</strong> <When iso={event.created_at} />
                    <EventDetail data={event.data} />
                  </li>
                ))}
              </ol>
            </section>
            <section class="panel" aria-labelledby="headers">
              <h2 id="headers">Headers</h2>
              {raw === undefined && <Loading what="headers" />}
              {headers ? (
                <pre>{headers}</pre>
              ) : (
                raw === null && <p class="field-hint">{e?.message_id === null ? 'Not sent: there are no headers yet.' : 'The full headers are kept only for emails delivered to the capture store.'}</p>
              )}
            </section>
          </div>
          <div>
            <section class="panel" aria-labelledby="message">
              <h2 id="message">Message</h2>
              {/* Untrusted HTML: no scripts, no same-origin access, and the dashboard's CSP besides. */}
              {e.html !== null ? <MessageFrame title="Message HTML" html={e.html} /> : <p class="field-hint">No HTML part.</p>}
              {e.text !== null && (
                <>
                  <h3>Text</h3>
                  <pre>{e.text}</pre>
                </>
              )}
            </section>
            {!!attachments.data?.data.length && (
              <section class="panel" aria-labelledby="attachments">
                <h2 id="attachments">Attachments</h2>
                <ul class="attachments">
                  {attachments.data.data.map((a) => (
                    <li key={a.id}>
                      <a href={a.download_url} download={a.filename ?? ''}>
                        {a.filename === null ? '(no name)' : withVisibleDirection(a.filename)}
                      </a>{' '}
                      <span class="field-hint">
                        {a.content_type}, {byteSize(a.size)}
                        {a.content_id !== undefined && `, shown in the message as cid:${a.content_id}`}
                      </span>
                    </li>
                  ))}
                </ul>
              </section>
            )}
            {raw && (
              <section class="panel" aria-labelledby="raw">
                <h2 id="raw">Raw message</h2>
                <pre>{raw}</pre>
              </section>
            )}
          </div>
        </div>
      )}
    </>
  );
}

/** A size for people: bytes, KB or MB (of 1,000 and 1,000,000 bytes). */
const byteSize = (bytes: number) => (bytes < 1000 ? `${bytes} bytes` : bytes < 1_000_000 ? `${(bytes / 1000).toFixed(1)} KB` : `${(bytes / 1_000_000).toFixed(1)} MB`);

export const emailRoutes: Route[] = [
  { path: '/emails', page: EmailLog },
  { path: '/emails/:id', page: EmailPage },
];

/**
 * A file name with its direction controls shown as their code points: `invoice\u202Efdp.exe` would
 * read as `invoiceexe.pdf`, a program passed off as a document.
 */
const withVisibleDirection = (name: string) => name.replace(/[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g, (c) => `[U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}]`);
