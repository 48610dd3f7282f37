// One contact's page: its details to edit, with its custom properties, its segments to add and remove,
// and deleting it. The properties editor is the new-contact form's too (./contacts.tsx).
import { useState } from 'preact/hooks';
import type { MailroomError, MailroomSchemas } from '../api.ts';
import { useLoad } from '../load.ts';
import { navigateOnAnswer, useLeaveGuard } from '../router.tsx';
import { useClient } from '../session.tsx';
import { ActionButton, Checkbox, ErrorNote, Form, Link, Loading, PageHeading, Select, TextField, When } from '../ui.tsx';

type Contact = MailroomSchemas['Contact'];
export type PropertyRow = { key: string; value: string };

const rowsOf = (properties: Record<string, string>): PropertyRow[] => Object.entries(properties).map(([key, value]) => ({ key, value }));
export const propertiesOf = (rows: PropertyRow[]): Record<string, string> => Object.fromEntries(rows.filter((row) => row.key.trim()).map((row) => [row.key.trim(), row.value]));

/**
 * Why the rows cannot be saved as they are, or null: a value without a name, or two rows of one name
 * (as saved, names trimmed), would each lose a value while the page said it was saved.
 */
export function propertyProblem(rows: PropertyRow[]): MailroomError | null {
  const problem = (message: string): MailroomError => ({ statusCode: 422, name: 'validation_error', message });
  const seen = new Set<string>();
  for (const [index, row] of rows.entries()) {
    const key = row.key.trim();
    if (!key && row.value) return problem(`Property ${index + 1} has a value but no name: name it, or remove it.`);
    if (seen.has(key)) return problem(`Two properties are named “${key}”: a contact has one value per name.`);
    if (key) seen.add(key);
  }
  return null;
}

/** Key and value rows for a contact's custom properties. */
export function PropertiesEditor({ rows, onRows }: { rows: PropertyRow[]; onRows: (rows: PropertyRow[]) => void }) {
  const change = (index: number, part: Partial<PropertyRow>) => onRows(rows.map((row, i) => (i === index ? { ...row, ...part } : row)));
  return (
    <fieldset class="properties">
      <legend>Properties</legend>
      {rows.map((row, index) => (
        <div class="row" key={index}>
          <TextField label={`Property ${index + 1} name`} value={row.key} onValue={(key) => change(index, { key })} />
          <TextField label={`Property ${index + 1} value`} value={row.value} onValue={(value) => change(index, { value })} />
          <button type="button" class="secondary" onClick={() => onRows(rows.filter((_, i) => i !== index))}>
            Remove property {index + 1}
          </button>
        </div>
      ))}
      <button type="button" class="secondary" onClick={() => onRows([...rows, { key: '', value: '' }])}>
        Add property
      </button>
    </fieldset>
  );
}

function EditContact({ contact, onSaved }: { contact: Contact; onSaved: () => void }) {
  const client = useClient();
  const [firstName, setFirstName] = useState(contact.first_name ?? '');
  const [lastName, setLastName] = useState(contact.last_name ?? '');
  const [unsubscribed, setUnsubscribed] = useState(contact.unsubscribed);
  const [rows, setRows] = useState<PropertyRow[]>(rowsOf(contact.properties));
  const [error, setError] = useState<MailroomError | null>(null);
  const [saved, setSaved] = useState(false);
  const unsaved =
    firstName !== (contact.first_name ?? '') ||
    lastName !== (contact.last_name ?? '') ||
    unsubscribed !== contact.unsubscribed ||
    JSON.stringify(propertiesOf(rows)) !== JSON.stringify(propertiesOf(rowsOf(contact.properties)));
  useLeaveGuard(unsaved);
  return (
    <Form
      class="panel"
      aria-labelledby="edit-contact"
      onSubmit={async () => {
        const refused = propertyProblem(rows);
        setSaved(false);
        if (refused) return setError(refused);
        const next = propertiesOf(rows);
        // A property left out keeps its value: the ones removed here are sent as null.
        const removed = Object.fromEntries(Object.keys(contact.properties).filter((key) => !(key in next)).map((key) => [key, null]));
        const { error } = await client.contacts.update(contact.id, {
          first_name: firstName || null,
          last_name: lastName || null,
          unsubscribed,
          properties: { ...removed, ...next },
        });
        setError(error ?? null);
        setSaved(!error);
        if (!error) onSaved();
      }}
    >
      <h2 id="edit-contact">Details</h2>
      <div class="row">
        <TextField label="First name" value={firstName} onValue={setFirstName} />
        <TextField label="Last name" value={lastName} onValue={setLastName} />
      </div>
      <Checkbox label="Unsubscribed" checked={unsubscribed} onValue={setUnsubscribed} />
      <PropertiesEditor rows={rows} onRows={setRows} />
      <ErrorNote error={error} />
      {saved && (
        <p class="notice" role="status">
          Saved.
        </p>
      )}
      <button type="submit">Save contact</button>
    </Form>
  );
}

function ContactSegments({ contactId }: { contactId: string }) {
  const client = useClient();
  const memberships = useLoad(() => client.GET('/contacts/{contact_id}/segments', { params: { path: { contact_id: contactId } } }), [contactId]);
  const segments = useLoad(() => client.GET('/segments'), []);
  const [chosen, setChosen] = useState('');
  const [error, setError] = useState<MailroomError | null>(null);
  const path = (segmentId: string) => ({ params: { path: { contact_id: contactId, segment_id: segmentId } } });
  const inSegments = new Set(memberships.data?.data.map((segment) => segment.id));
  const others = (segments.data?.data ?? []).filter((segment) => !inSegments.has(segment.id));
  // The choice, while it is still one to add: once added it leaves the list, and the first left is shown.
  const selected = others.some((segment) => segment.id === chosen) ? chosen : others[0]?.id;
  return (
    <section class="panel" aria-labelledby="contact-segments">
      <h2 id="contact-segments">Segments</h2>
      <ErrorNote error={memberships.error ?? segments.error ?? error} />
      {memberships.loading && <Loading what="segments" />}
      {memberships.data && memberships.data.data.length === 0 && <p>In no segment.</p>}
      <ul>
        {memberships.data?.data.map((segment) => (
          <li key={segment.id}>
            <Link to={`/segments/${segment.id}`}>{segment.name}</Link>{' '}
            <ActionButton
              class="secondary"
              onClick={async () => {
                const { error } = await client.DELETE('/contacts/{contact_id}/segments/{segment_id}', path(segment.id));
                setError(error ?? null);
                memberships.reload();
              }}
            >
              Remove<span class="visually-hidden"> from {segment.name}</span>
            </ActionButton>
          </li>
        ))}
      </ul>
      {others.length > 0 && (
        <Form
          class="row"
          onSubmit={async () => {
            const { error } = await client.POST('/contacts/{contact_id}/segments/{segment_id}', path(selected!));
            setError(error ?? null);
            memberships.reload();
          }}
        >
          <Select label="Segment" value={selected!} onValue={setChosen} options={others.map((segment) => ({ value: segment.id, label: segment.name }))} />
          <button type="submit">Add to segment</button>
        </Form>
      )}
    </section>
  );
}

export function ContactPage({ id }: Record<string, string>) {
  const client = useClient();
  const contact = useLoad(() => client.contacts.get(id!), [id]);
  const [error, setError] = useState<MailroomError | null>(null);
  return (
    <>
      <PageHeading title={contact.data?.email ?? 'Contact'}>
        <ActionButton
          class="danger"
          disabled={!contact.data}
          onClick={async () => {
            if (!confirm(`Delete ${contact.data!.email}? This cannot be undone.`)) return;
            const go = navigateOnAnswer();
            const { error } = await client.contacts.remove(id!);
            if (error) setError(error);
            else go('/contacts');
          }}
        >
          Delete contact
        </ActionButton>
      </PageHeading>
      <p>
        <Link to="/contacts">All contacts</Link>
      </p>
      <ErrorNote error={contact.error ?? error} />
      {contact.loading && !contact.data && <Loading what="the contact" />}
      {contact.data && (
        <div class="columns">
          <div>
            <dl class="facts panel">
              <dt>Email</dt>
              <dd>{contact.data.email}</dd>
              <dt>Id</dt>
              <dd>{contact.data.id}</dd>
              <dt>Created</dt>
              <dd>
                <When iso={contact.data.created_at} />
              </dd>
            </dl>
            <EditContact contact={contact.data} key={contact.data.id} onSaved={contact.reload} />
          </div>
          <ContactSegments contactId={contact.data.id} />
        </div>
      )}
    </>
  );
}

