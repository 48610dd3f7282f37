// API keys: the list, revoking one, and a new key (its token shown once).
import { useState } from 'preact/hooks';
import type { MailroomError, MailroomSchemas } from '../api.ts';
import { List } from '../list.tsx';
import { useLoad } from '../load.ts';
import type { Route } from '../route.ts';
import { useClient, useSession } from '../session.tsx';
import { ErrorNote, Form, PageHeading, Select, ShownOnce, TextField, When } from '../ui.tsx';

type Permission = MailroomSchemas['ApiKeyPermission'];
const PERMISSIONS: { value: Permission; label: string }[] = [
  { value: 'full_access', label: 'Full access' },
  { value: 'sending_access', label: 'Sending access' },
];

function ApiKeys() {
  const client = useClient();
  const { signOut } = useSession();
  const keys = useLoad(() => client.GET('/api-keys'), []);
  const [name, setName] = useState('');
  const [permission, setPermission] = useState<Permission>('sending_access');
  const [created, setCreated] = useState<{ name: string; token: string } | null>(null);
  const [createError, setCreateError] = useState<MailroomError | null>(null);

  async function create() {
    // Trimmed, as segments' and topics' names are: a name of spaces alone is then refused as empty.
    const { data, error } = await client.POST('/api-keys', { body: { name: name.trim(), permission } });
    setCreateError(error ?? null);
    if (!data) return;
    setCreated({ name: name.trim(), token: data.token });
    setName('');
    keys.reload();
  }

  async function revoke(key: MailroomSchemas['ApiKey']) {
    const revoked = await client.DELETE('/api-keys/{api_key_id}', { params: { path: { api_key_id: key.id } } });
    if (revoked.error) return revoked;
    // Revoking the key this tab signed in with ends the session: its next call would be refused.
    const check = await client.GET('/api-keys', { params: { query: { limit: 1 } } });
    if (check.error?.name === 'invalid_api_key') signOut();
    return revoked;
  }

  return (
    <>
      <PageHeading title="API keys" />
      <List
        what="API keys"
        loaded={keys}
        empty="No API keys yet."
        columns={[
          { heading: 'Name', cell: (key) => key.name },
          { heading: 'Permission', cell: (key) => PERMISSIONS.find((p) => p.value === key.permission)?.label },
          { heading: 'Created', cell: (key) => <When iso={key.created_at} /> },
          { heading: 'Last used', cell: (key) => <When iso={key.last_used_at} /> },
        ]}
        remove={{
          verb: 'Revoke',
          name: (key) => key.name,
          confirm: (key) => `Revoke the key “${key.name}”? Requests made with it will be refused at once.`,
          call: revoke,
        }}
      />
      <Form class="panel" onSubmit={create} aria-labelledby="new-key">
        <h2 id="new-key">New API key</h2>
        <div class="row">
          <TextField label="Name" value={name} onValue={setName} required />
          <Select label="Permission" value={permission} onValue={(value) => setPermission(value as Permission)} options={PERMISSIONS} />
        </div>
        <ErrorNote error={createError} />
        <button type="submit">Create API key</button>
        {created && <ShownOnce label={`API key “${created.name}”`} value={created.token} />}
      </Form>
    </>
  );
}

export const apiKeyRoutes: Route[] = [{ path: '/api-keys', page: ApiKeys }];
