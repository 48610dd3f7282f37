// One broadcast: a draft's editor with a live preview for a chosen contact and a test send, then
// sending it now or at a time; a broadcast that is no longer a draft is shown as it stands, with a
// cancel button while that is still possible.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { parseParts, personalize, type Recipient } from '../../server/broadcasts/placeholders.ts';
import type { MailroomError, MailroomSchemas } from '../api.ts';
import { useLoad } from '../load.ts';
import { replyToText, replyToValue } from '../replyTo.ts';
import { navigateOnAnswer, useLeaveGuard } from '../router.tsx';
import { useClient } from '../session.tsx';
import { ActionButton, ErrorNote, Form, Link, Loading, MessageFrame, PageHeading, Select, TextArea, TextField, Unreadable, When } from '../ui.tsx';

type Broadcast = MailroomSchemas['Broadcast'];
type Draft = Record<'name' | 'from' | 'reply_to' | 'subject' | 'preview_text' | 'segment_id' | 'topic_id' | 'html' | 'text', string>;

const draftOf = (broadcast?: Broadcast): Draft => ({
  name: broadcast?.name ?? '',
  from: broadcast?.from ?? '',
  reply_to: replyToText(broadcast?.reply_to),
  subject: broadcast?.subject ?? '',
  preview_text: broadcast?.preview_text ?? '',
  segment_id: broadcast?.segment_id ?? '',
  topic_id: broadcast?.topic_id ?? '',
  html: broadcast?.html ?? '',
  text: broadcast?.text ?? '',
});

/**
 * The request body. Making a broadcast, fields left empty are left out, so the API's own defaults and
 * checks apply; changing one, those the API can empty (reply-to, preview text, the bodies) are sent
 * empty, or emptying them would not be saved. A name and a segment cannot be taken away.
 */
function bodyOf(draft: Draft, change: boolean) {
  const given = (value: string) => (value.trim() === '' ? undefined : value);
  const emptied = (value: string) => given(value) ?? (change ? '' : undefined);
  const replyTo = replyToValue(draft.reply_to) ?? (change ? [] : undefined);
  return {
    from: draft.from.trim(),
    subject: draft.subject,
    ...(given(draft.name) && { name: draft.name }),
    ...(replyTo !== undefined && { reply_to: replyTo }),
    ...(emptied(draft.preview_text) !== undefined && { preview_text: emptied(draft.preview_text) }),
    ...(given(draft.segment_id) && { segment_id: draft.segment_id }),
    ...(emptied(draft.html) !== undefined && { html: emptied(draft.html) }),
    ...(emptied(draft.text) !== undefined && { text: emptied(draft.text) }),
  };
}

const NO_ONE: Recipient = { email: 'someone@example.com', first_name: null, last_name: null, properties: {} };

export function NewBroadcast() {
  return <Editor />;
}

/** How often a broadcast going out is read again, so that the page shows it `sent` without a Refresh. */
const GOING_OUT_REFRESH_MS = 2000;

export function BroadcastPage({ id }: Record<string, string>) {
  const client = useClient();
  const broadcast = useLoad(() => client.broadcasts.get(id!), [id]);
  const goingOut = broadcast.data?.status === 'queued';
  useEffect(() => {
    if (!goingOut || broadcast.loading) return;
    const timer = setTimeout(broadcast.reload, GOING_OUT_REFRESH_MS);
    return () => clearTimeout(timer);
  }, [goingOut, broadcast.loading]);
  if (broadcast.error) return <Unreadable title="Broadcast" back={['/broadcasts', 'All broadcasts']} error={broadcast.error} />;
  if (!broadcast.data) return <Loading what="the broadcast" />;
  if (broadcast.data.status === 'draft') return <Editor broadcast={broadcast.data} key={broadcast.data.id} onChanged={broadcast.reload} />;
  return <Sending broadcast={broadcast.data} onChanged={broadcast.reload} />;
}

function Editor({ broadcast, onChanged }: { broadcast?: Broadcast; onChanged?: () => void }) {
  const client = useClient();
  const [draft, setDraft] = useState<Draft>(() => draftOf(broadcast));
  const [saved, setSaved] = useState<Draft>(() => draftOf(broadcast));
  const [error, setError] = useState<MailroomError | null>(null);
  const segments = useLoad(() => client.GET('/segments'), []);
  const topics = useLoad(() => client.GET('/topics'), []);
  const field = (name: keyof Draft) => ({ value: draft[name], onValue: (value: string) => setDraft({ ...draft, [name]: value }) });
  const unsaved = JSON.stringify(draft) !== JSON.stringify(saved);
  useLeaveGuard(unsaved);

  async function save() {
    const body = bodyOf(draft, broadcast !== undefined);
    if (!broadcast) {
      const go = navigateOnAnswer();
      const { data, error } = await client.POST('/broadcasts', { body: { ...body, ...(draft.topic_id && { topic_id: draft.topic_id }) } });
      setError(error ?? null);
      if (data) go(`/broadcasts/${data.id}`, { replace: true });
      return;
    }
    const { error } = await client.PATCH('/broadcasts/{broadcast_id}', { params: { path: { broadcast_id: broadcast.id } }, body: { ...body, topic_id: draft.topic_id || null } });
    setError(error ?? null);
    if (error) return;
    // The form shows what was stored, not what was typed: a name or segment left empty is still there.
    const { data } = await client.broadcasts.get(broadcast.id);
    const stored = data ? draftOf(data) : draft;
    setDraft(stored);
    setSaved(stored);
  }

  return (
    <>
      <PageHeading title={broadcast ? `Broadcast: ${broadcast.name || 'Untitled'}` : 'New broadcast'}>
        {broadcast && <span class="status">draft</span>}
      </PageHeading>
      <p>
        <Link to="/broadcasts">All broadcasts</Link>
      </p>
      <div class="columns">
        <Form class="panel" onSubmit={save} aria-label="Broadcast">
          <TextField label="Name" {...field('name')} />
          <TextField label="From" {...field('from')} required placeholder="Acme <news@acme.dev>" />
          <TextField label="Reply-to" {...field('reply_to')} hint="One address, or several separated by commas." />
          <TextField label="Subject" {...field('subject')} required />
          <TextField label="Preview text" {...field('preview_text')} />
          <div class="row">
            <Select
              label="Segment"
              required
              {...field('segment_id')}
              options={[{ value: '', label: 'Choose a segment' }, ...(segments.data?.data ?? []).map((s) => ({ value: s.id, label: s.name }))]}
            />
            <Select label="Topic" {...field('topic_id')} options={[{ value: '', label: 'No topic' }, ...(topics.data?.data ?? []).map((t) => ({ value: t.id, label: t.name }))]} />
          </div>
          <TextArea label="HTML" {...field('html')} rows={12} hint="Placeholders: {{{FIRST_NAME|fallback}}}, {{{contact.email}}}, a property by its key, {{{RESEND_UNSUBSCRIBE_URL}}}." />
          <TextArea label="Text" {...field('text')} rows={6} hint="Left empty, the plain text is made from the HTML when it is sent." />
          <ErrorNote error={error} />
          <button type="submit">{broadcast ? 'Save draft' : 'Create draft'}</button>
          {broadcast && unsaved && <p class="field-hint">Unsaved changes: save the draft before sending it.</p>}
        </Form>
        <div>
          <Preview draft={draft} />
          {broadcast && <SendControls broadcast={broadcast} draft={draft} unsaved={unsaved} onChanged={onChanged} />}
        </div>
      </div>
    </>
  );
}

/** The subject and HTML as the chosen contact will get them, rendered by the server's own placeholder code. */
function Preview({ draft }: { draft: Draft }) {
  const client = useClient();
  const [contactId, setContactId] = useState('');
  const members = useLoad(
    async () => (draft.segment_id ? client.GET('/segments/{segment_id}/contacts', { params: { path: { segment_id: draft.segment_id }, query: { limit: 50 } } }) : { data: undefined }),
    [draft.segment_id],
  );
  const contacts = members.data?.data ?? [];
  const chosen = contacts.find((contact) => contact.id === contactId);
  const recipient: Recipient = chosen ? { email: chosen.email, first_name: chosen.first_name ?? null, last_name: chosen.last_name ?? null, properties: chosen.properties } : NO_ONE;
  const rendered = useMemo(() => {
    try {
      const prepared = { subject: parseParts(draft.subject), html: draft.html ? parseParts(draft.html) : null, text: draft.text ? parseParts(draft.text) : null };
      return personalize(prepared, recipient, `${location.origin}/unsubscribe/preview`);
    } catch (failure) {
      return { subject: draft.subject, html: null, text: null, problem: (failure as Error).message };
    }
  }, [draft.subject, draft.html, draft.text, recipient.email]);
  return (
    <section class="panel" aria-labelledby="preview-heading">
      <h2 id="preview-heading">Preview</h2>
      <Select
        label="Preview as"
        value={contactId}
        onValue={setContactId}
        options={[{ value: '', label: 'A contact without a name (fallbacks shown)' }, ...contacts.map((c) => ({ value: c.id, label: c.email }))]}
      />
      {!draft.segment_id && <p class="field-hint">Choose a segment to preview as one of its contacts.</p>}
      <dl class="facts">
        <dt>Subject</dt>
        <dd data-testid="preview-subject">{rendered.subject}</dd>
        {draft.preview_text && (
          <>
            <dt>Preview text</dt>
            <dd>{draft.preview_text}</dd>
          </>
        )}
      </dl>
      {'problem' in rendered && <p class="error">{rendered.problem}</p>}
      {/* Untrusted HTML: no scripts, no same-origin access, and the dashboard's CSP besides. */}
      <MessageFrame title="Message preview" html={rendered.html ?? `<pre>${(rendered.text ?? '').replace(/[&<>]/g, (c) => `&#${c.charCodeAt(0)};`)}</pre>`} />
      <TestSend draft={draft} content={rendered} />
    </section>
  );
}

/** Sends the preview as it stands (the content the Preview rendered) to one address. */
function TestSend({ draft, content }: { draft: Draft; content: { subject: string; html: string | null; text: string | null; problem?: string } }) {
  const client = useClient();
  const [to, setTo] = useState('');
  const [sent, setSent] = useState<string | null>(null);
  const [error, setError] = useState<MailroomError | null>(null);
  return (
    <Form
      class="row"
      aria-label="Send a test"
      onSubmit={async () => {
        const { reply_to } = bodyOf(draft, false);
        const { data, error } = await client.emails.send({
          from: draft.from.trim(),
          to: to.trim(),
          subject: `[Test] ${content.subject}`,
          ...(content.html && { html: content.html }),
          ...(content.text && { text: content.text }),
          ...(reply_to && { reply_to }),
        });
        setError(error ?? null);
        setSent(data?.id ?? null);
      }}
    >
      <TextField label="Test address" type="email" value={to} onValue={setTo} required />
      <button type="submit" disabled={content.problem !== undefined}>
        Send test
      </button>
      <ErrorNote error={error} />
      {sent && (
        <p class="notice" role="status">
          Test sent: <Link to={`/emails/${sent}`}>see the email</Link>.
        </p>
      )}
    </Form>
  );
}

function SendControls({ broadcast, unsaved, onChanged }: { broadcast: Broadcast; draft: Draft; unsaved: boolean; onChanged?: () => void }) {
  const client = useClient();
  const [at, setAt] = useState('');
  const [error, setError] = useState<MailroomError | Error | null>(null);
  const send = async (scheduledAt?: string) => {
    const { error } = await client.POST('/broadcasts/{broadcast_id}/send', { params: { path: { broadcast_id: broadcast.id } }, body: scheduledAt ? { scheduled_at: scheduledAt } : {} });
    setError(error ?? null);
    if (!error) onChanged?.();
  };
  return (
    <section class="panel" aria-labelledby="send-heading">
      <h2 id="send-heading">Send</h2>
      <div class="actions">
        <ActionButton disabled={unsaved} onClick={() => confirm('Send this broadcast to its segment now?') && send()}>
          Send now
        </ActionButton>
      </div>
      <Form
        class="row"
        aria-label="Schedule"
        onSubmit={() => {
          // The API sends a broadcast scheduled in the past at once: here that is more likely a slip.
          const when = new Date(at);
          if (!(when.getTime() > Date.now())) return setError(new Error('That time has passed. Choose a later time, or use Send now.'));
          return send(when.toISOString());
        }}
      >
        <TextField label="Send at" type="datetime-local" value={at} onValue={setAt} required />
        <button type="submit" disabled={unsaved}>
          Schedule
        </button>
      </Form>
      <ErrorNote error={error} />
    </section>
  );
}

/** A broadcast that is scheduled, sending, sent or canceled: what it is, and cancel while it can be. */
function Sending({ broadcast, onChanged }: { broadcast: Broadcast; onChanged: () => void }) {
  const client = useClient();
  const [error, setError] = useState<MailroomError | null>(null);
  const segments = useLoad(() => client.GET('/segments'), []);
  const topics = useLoad(() => client.GET('/topics'), []);
  const cancelable = broadcast.status === 'scheduled' || broadcast.status === 'queued';
  return (
    <>
      <PageHeading title={`Broadcast: ${broadcast.name || 'Untitled'}`}>
        {cancelable && (
          <ActionButton
            class="danger"
            onClick={async () => {
              if (!confirm(broadcast.status === 'scheduled' ? 'Cancel this broadcast? It becomes a draft again.' : 'Cancel this broadcast? Emails not yet sent will not be.')) return;
              const { error } = await client.POST('/broadcasts/{broadcast_id}/cancel', { params: { path: { broadcast_id: broadcast.id } } });
              setError(error ?? null);
              onChanged();
            }}
          >
            Cancel broadcast
          </ActionButton>
        )}
        <button type="button" class="secondary" onClick={onChanged}>
          Refresh
        </button>
      </PageHeading>
      <p>
        <Link to="/broadcasts">All broadcasts</Link>
      </p>
      <ErrorNote error={error} />
      <dl class="facts panel">
        <dt>Status</dt>
        <dd>
          <span class={`status status-${broadcast.status}`}>{broadcast.status}</span>
        </dd>
        <dt>Scheduled for</dt>
        <dd>
          <When iso={broadcast.scheduled_at} />
        </dd>
        <dt>Sent</dt>
        <dd>
          <When iso={broadcast.sent_at} />
        </dd>
        <dt>From</dt>
        <dd>{broadcast.from}</dd>
        <dt>Reply-to</dt>
        <dd>{broadcast.reply_to?.join(', ') ?? '—'}</dd>
        <dt>Subject</dt>
        <dd>{broadcast.subject}</dd>
        <dt>Preview text</dt>
        <dd>{broadcast.preview_text ?? '—'}</dd>
        <dt>Segment</dt>
        <dd>{broadcast.segment_id ? <Link to={`/segments/${broadcast.segment_id}`}>{segments.data?.data.find((s) => s.id === broadcast.segment_id)?.name ?? broadcast.segment_id}</Link> : '—'}</dd>
        <dt>Topic</dt>
        <dd>{broadcast.topic_id ? (topics.data?.data.find((t) => t.id === broadcast.topic_id)?.name ?? broadcast.topic_id) : '—'}</dd>
      </dl>
      <Preview draft={draftOf(broadcast)} />
    </>
  );
}
