// Contacts: find one by address; the list, newest first, a page at a time; create one. One contact's
// page is ./contact.tsx.
import { useState } from 'preact/hooks';
import type { MailroomError } from '../api.ts';
import { Address, List, useCursor } from '../list.tsx';
import { useLoad } from '../load.ts';
import type { Route } from '../route.ts';
import { navigate, navigateOnAnswer } from '../router.tsx';
import { useClient } from '../session.tsx';
import { Checkbox, ErrorNote, Form, Link, PageHeading, TextField, When } from '../ui.tsx';
import { ContactPage, propertiesOf, propertyProblem, PropertiesEditor, type PropertyRow } from './contact.tsx';

const PAGE_SIZE = 50;

function FindContact() {
  const client = useClient();
  const [email, setEmail] = useState('');
  const [error, setError] = useState<MailroomError | null>(null);
  return (
    <Form
      class="panel"
      role="search"
      onSubmit={async () => {
        const go = navigateOnAnswer();
        const { data, error } = await client.contacts.get(email.trim());
        if (data) go(`/contacts/${data.id}`);
        else setError(error.statusCode === 404 ? { ...error, message: 'No contact has this address.' } : error);
      }}
    >
      <div class="row">
        <TextField label="Email address" type="email" value={email} onValue={setEmail} required />
        <button type="submit">Find</button>
      </div>
      <ErrorNote error={error} />
    </Form>
  );
}

function NewContact({ onCreated }: { onCreated: () => void }) {
  const client = useClient();
  const [email, setEmail] = useState('');
  const [firstName, setFirstName] = useState('');
  const [lastName, setLastName] = useState('');
  const [unsubscribed, setUnsubscribed] = useState(false);
  const [rows, setRows] = useState<PropertyRow[]>([]);
  const [error, setError] = useState<MailroomError | null>(null);
  /** The contact that already had the address given: the API answers 200 with it, unchanged. */
  const [existing, setExisting] = useState<string | null>(null);
  return (
    <Form
      class="panel"
      aria-labelledby="new-contact"
      onSubmit={async () => {
        setExisting(null);
        const refused = propertyProblem(rows);
        if (refused) return setError(refused);
        const { data, error, response } = await client.contacts.create({
          email: email.trim(),
          ...(firstName && { first_name: firstName }),
          ...(lastName && { last_name: lastName }),
          unsubscribed,
          properties: propertiesOf(rows),
        });
        setError(error ?? null);
        if (error) return;
        // Kept as typed: nothing of it was saved.
        if (response.status === 200) return setExisting(data.id);
        setEmail('');
        setFirstName('');
        setLastName('');
        setUnsubscribed(false);
        setRows([]);
        onCreated();
      }}
    >
      <h2 id="new-contact">New contact</h2>
      <div class="row">
        <TextField label="Email" type="email" value={email} onValue={setEmail} required />
        <TextField label="First name" value={firstName} onValue={setFirstName} />
        <TextField label="Last name" value={lastName} onValue={setLastName} />
      </div>
      <Checkbox label="Unsubscribed" checked={unsubscribed} onValue={setUnsubscribed} />
      <PropertiesEditor rows={rows} onRows={setRows} />
      <ErrorNote error={error} />
      {existing && (
        <p class="error" role="alert">
          A contact with this address already exists, and was left as it is. <Link to={`/contacts/${existing}`}>Open it</Link> to change it.
        </p>
      )}
      <button type="submit">Create contact</button>
    </Form>
  );
}

function ContactList() {
  const client = useClient();
  const cursor = useCursor();
  const list = useLoad(() => client.contacts.list({ limit: PAGE_SIZE, ...cursor }), [cursor.after, cursor.before]);
  return (
    <>
      <PageHeading title="Contacts" />
      <FindContact />
      <List
        what="contacts"
        loaded={list}
        paged={{ path: '/contacts' }}
        empty="No contacts here."
        columns={[
          { heading: 'Email', cell: (contact) => <Address email={contact.email} to={`/contacts/${contact.id}`} /> },
          { heading: 'Name', cell: (contact) => [contact.first_name, contact.last_name].filter(Boolean).join(' ') },
          { heading: 'Subscribed', cell: (contact) => (contact.unsubscribed ? 'Unsubscribed' : 'Subscribed') },
          { heading: 'Created', cell: (contact) => <When iso={contact.created_at} /> },
        ]}
      />
      <NewContact onCreated={() => (cursor.after || cursor.before ? navigate('/contacts') : list.reload())} />
    </>
  );
}

export const contactRoutes: Route[] = [
  { path: '/contacts', page: ContactList },
  { path: '/contacts/:id', page: ContactPage },
];
