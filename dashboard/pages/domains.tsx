// Domains: the list, and a new domain; one domain's DNS records to publish, each name and value copied
// with a button, its verification followed until the check ends, its tracking and TLS settings, and
// deleting it.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { MailroomError, MailroomSchemas } from '../api.ts';
import { List, useCursor } from '../list.tsx';
import { useLoad } from '../load.ts';
import type { Route } from '../route.ts';
import { navigateOnAnswer, useLeaveGuard } from '../router.tsx';
import { useClient } from '../session.tsx';
import { ActionButton, Checkbox, ErrorNote, Form, Link, Loading, PageHeading, Select, TextField, Unreadable, When } from '../ui.tsx';

type Domain = MailroomSchemas['Domain'];
type DomainRecord = MailroomSchemas['DomainRecord'];
type Tls = MailroomSchemas['DomainTls'];

const TLS: { value: Tls; label: string }[] = [
  { value: 'opportunistic', label: 'Opportunistic: TLS when offered' },
  { value: 'enforced', label: 'Enforced: TLS only' },
];

/** What each status means for the person looking at it, and what to do next. */
const STATUS_MEANING: Record<MailroomSchemas['DomainStatus'], string> = {
  not_started: 'Publish the records below with your DNS provider, then verify the domain.',
  pending: 'Checking the DNS records…',
  verified: 'Every required record was found as given: mail from this domain is signed with its DKIM key.',
  failed: 'A required record was missing or different. Correct the records marked failed, then verify again.',
  temporary_failure: 'A DNS look-up could not be answered. The check is made again; you can also verify again.',
};

function Domains() {
  const client = useClient();
  const cursor = useCursor();
  const list = useLoad(() => client.GET('/domains', { params: { query: { limit: 50, ...cursor } } }), [cursor.after, cursor.before]);
  const [name, setName] = useState('');
  const [createError, setCreateError] = useState<MailroomError | null>(null);
  return (
    <>
      <PageHeading title="Domains" />
      <List
        what="domains"
        loaded={list}
        paged={{ path: '/domains' }}
        empty="No domains yet."
        columns={[
          { heading: 'Name', cell: (domain) => <Link to={`/domains/${domain.id}`}>{domain.name}</Link> },
          { heading: 'Status', cell: (domain) => <span class={`status status-${domain.status}`}>{domain.status}</span> },
          { heading: 'Created', cell: (domain) => <When iso={domain.created_at} /> },
        ]}
      />
      <Form
        class="panel"
        aria-labelledby="new-domain"
        onSubmit={async () => {
          // No pattern of its own: the server says what it refuses, and why.
          const go = navigateOnAnswer();
          const { data, error } = await client.POST('/domains', { body: { name: name.trim() } });
          setCreateError(error ?? null);
          if (data) go(`/domains/${data.id}`);
        }}
      >
        <h2 id="new-domain">New domain</h2>
        <div class="row">
          <TextField label="Name" value={name} onValue={setName} required placeholder="acme.dev" hint="The domain you send from, such as acme.dev or mail.acme.dev." />
          <button type="submit">Add domain</button>
        </div>
        <ErrorNote error={createError} />
      </Form>
    </>
  );
}

/** How often a domain being checked is read again, so that the page shows how the check ended without a Refresh. */
const CHECKING_REFRESH_MS = 2000;

function DomainPage({ id }: Record<string, string>) {
  const client = useClient();
  const domain = useLoad(() => client.GET('/domains/{domain_id}', { params: { path: { domain_id: id! } } }), [id]);
  const checking = domain.data?.status === 'pending';
  useEffect(() => {
    if (!checking || domain.loading) return;
    const timer = setTimeout(domain.reload, CHECKING_REFRESH_MS);
    return () => clearTimeout(timer);
  }, [checking, domain.loading]);
  if (domain.error) return <Unreadable title="Domain" back={['/domains', 'All domains']} error={domain.error} />;
  if (!domain.data) return <Loading what="the domain" />;
  return <DomainView domain={domain.data} onChanged={domain.reload} />;
}

function DomainView({ domain, onChanged }: { domain: Domain; onChanged: () => void }) {
  const client = useClient();
  const [error, setError] = useState<MailroomError | null>(null);
  const path = { params: { path: { domain_id: domain.id } } };
  return (
    <>
      <PageHeading title={`Domain: ${domain.name}`}>
        {/* A status region: verifying changes it, and a screen reader says so. */}
        <span class={`status status-${domain.status}`} role="status">
          {domain.status}
        </span>
        <ActionButton
          onClick={async () => {
            const { error } = await client.POST('/domains/{domain_id}/verify', path);
            setError(error ?? null);
            onChanged();
          }}
        >
          Verify
        </ActionButton>
        <ActionButton
          class="danger"
          onClick={async () => {
            if (!confirm(`Delete the domain “${domain.name}”? Mail from it is no longer signed, and API keys restricted to it can no longer send.`)) return;
            const go = navigateOnAnswer();
            const { error } = await client.DELETE('/domains/{domain_id}', path);
            setError(error ?? null);
            if (!error) go('/domains');
          }}
        >
          Delete domain
        </ActionButton>
      </PageHeading>
      <p>
        <Link to="/domains">All domains</Link> · added <When iso={domain.created_at} />
      </p>
      <p>{STATUS_MEANING[domain.status]}</p>
      <ErrorNote error={error} />
      <h2 id="records-heading">DNS records</h2>
      <p class="field-hint">Names are relative to {domain.name}. A provider that asks for the full name takes the name followed by .{domain.name}.</p>
      <Records records={domain.records} />
      <p class="field-hint">
        A new DKIM key is listed beside the one in use, which goes on signing until a check finds the new record; then the new key signs.{' '}
        <ActionButton
          onClick={async () => {
            if (!confirm(`Make a new DKIM key for “${domain.name}”? Publish its record, then verify.`)) return;
            const { error } = await client.POST('/domains/{domain_id}/dkim-key/rotate', path);
            setError(error ?? null);
            onChanged();
          }}
        >
          Rotate DKIM key
        </ActionButton>
      </p>
      <Settings domain={domain} onChanged={onChanged} />
    </>
  );
}

/**
 * The records to publish. Two records of one kind are told apart by their type (SPF's TXT and MX), or
 * else by their name (a DKIM key being rotated in beside the one in use), so that each Copy button says
 * which record it copies from.
 */
function Records({ records }: { records: DomainRecord[] }) {
  const named = (record: DomainRecord) => {
    const sameKind = records.filter((other) => other.record === record.record);
    if (sameKind.length === 1) return `${record.record} record`;
    if (sameKind.filter((other) => other.type === record.type).length === 1) return `${record.record} ${record.type} record`;
    return `${record.record} record ${record.name}`;
  };
  return (
    <table class="records" aria-labelledby="records-heading">
      <thead>
        <tr>
          <th scope="col">Record</th>
          <th scope="col">Type</th>
          <th scope="col">Name</th>
          <th scope="col">Value</th>
          <th scope="col">Priority</th>
          <th scope="col">TTL</th>
          <th scope="col">Status</th>
        </tr>
      </thead>
      <tbody>
        {records.map((record) => (
          <tr key={`${record.record} ${record.type} ${record.name}`}>
            <td>{record.record}</td>
            <td>{record.type}</td>
            <td class="record-name">
              <Copyable text={record.name} what={`name of ${named(record)}`} />
            </td>
            <td class="record-value">
              <Copyable text={record.value} what={`value of ${named(record)}`} />
            </td>
            <td>{record.priority ?? <span class="muted">—</span>}</td>
            <td>{record.ttl}</td>
            <td>
              <span class={`status status-${record.status}`}>{record.status}</span>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** How long "Copied" stays beside its button. */
const COPIED_SHOWN_MS = 4000;

/**
 * Text to publish, with a button that puts it on the clipboard and says so beside itself. Where the
 * browser gives no clipboard (a dashboard served over plain HTTP from another host), the text is
 * selected instead, for the keyboard's own copy.
 */
function Copyable({ text, what }: { text: string; what: string }) {
  const [said, setSaid] = useState('');
  const shown = useRef<HTMLElement>(null);
  useEffect(() => {
    if (!said) return;
    const timer = setTimeout(() => setSaid(''), COPIED_SHOWN_MS);
    return () => clearTimeout(timer);
  }, [said]);
  async function copy() {
    try {
      await navigator.clipboard.writeText(text);
      setSaid('Copied');
    } catch {
      if (shown.current) getSelection()?.selectAllChildren(shown.current);
      setSaid('Selected: press Ctrl+C (⌘C on a Mac) to copy it');
    }
  }
  return (
    <>
      <code ref={shown}>{text}</code>
      <div class="copy">
        <button type="button" class="secondary" onClick={() => void copy()}>
          Copy<span class="visually-hidden"> {what}</span>
        </button>
        {/* Always there, so that a screen reader hears it filled. */}
        <span class="copied" role="status">
          {said}
        </span>
      </div>
    </>
  );
}

type Draft = { open_tracking: boolean; click_tracking: boolean; tracking_subdomain: string; tls: Tls };

const draftOf = (domain: Domain): Draft => ({
  open_tracking: domain.open_tracking,
  click_tracking: domain.click_tracking,
  tracking_subdomain: domain.tracking_subdomain ?? '',
  tls: domain.tls,
});

/**
 * Tracking and TLS. The form keeps what was typed while the domain is read again during a check, and
 * shows what was stored once saved (a subdomain typed in capitals is kept lower-cased).
 */
function Settings({ domain, onChanged }: { domain: Domain; onChanged: () => void }) {
  const client = useClient();
  const [draft, setDraft] = useState<Draft>(() => draftOf(domain));
  const [saved, setSaved] = useState<Draft>(() => draftOf(domain));
  const [error, setError] = useState<MailroomError | null>(null);
  const [done, setDone] = useState(false);
  const unsaved = JSON.stringify(draft) !== JSON.stringify(saved);
  useLeaveGuard(unsaved);
  const change = (part: Partial<Draft>) => {
    setDraft({ ...draft, ...part });
    setDone(false);
  };

  async function save() {
    const subdomain = draft.tracking_subdomain.trim();
    // The contract has no way to remove a tracking subdomain: left empty, it is not sent.
    const body = { open_tracking: draft.open_tracking, click_tracking: draft.click_tracking, tls: draft.tls, ...(subdomain && { tracking_subdomain: subdomain }) };
    const path = { params: { path: { domain_id: domain.id } } };
    const { error } = await client.PATCH('/domains/{domain_id}', { ...path, body });
    setError(error ?? null);
    if (error) return;
    const { data } = await client.GET('/domains/{domain_id}', path);
    const stored = data ? draftOf(data) : draft;
    setDraft(stored);
    setSaved(stored);
    setDone(true);
    onChanged();
  }

  return (
    <Form class="panel settings" onSubmit={save} aria-labelledby="settings-heading">
      <h2 id="settings-heading">Tracking and TLS</h2>
      <Checkbox label="Open tracking" checked={draft.open_tracking} onValue={(open_tracking) => change({ open_tracking })} />
      <Checkbox label="Click tracking" checked={draft.click_tracking} onValue={(click_tracking) => change({ click_tracking })} />
      <div class="row">
        <TextField
          label="Tracking subdomain"
          value={draft.tracking_subdomain}
          onValue={(tracking_subdomain) => change({ tracking_subdomain })}
          placeholder="links"
          hint={`One label, such as links for links.${domain.name}. Once set, it can be changed but not removed.`}
        />
        <Select label="TLS" value={draft.tls} onValue={(tls) => change({ tls: tls as Tls })} options={TLS} />
      </div>
      <ErrorNote error={error} />
      <button type="submit">Save settings</button>
      {unsaved && <p class="field-hint">Unsaved changes.</p>}
      {done && (
        <p class="notice" role="status">
          Settings saved.
        </p>
      )}
    </Form>
  );
}

export const domainRoutes: Route[] = [
  { path: '/domains', page: Domains },
  { path: '/domains/:id', page: DomainPage },
];
