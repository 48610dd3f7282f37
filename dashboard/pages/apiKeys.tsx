// API keys: the list, a new key (its token shown once), and revoking one.
import { useState } from 'preact/hooks';
import type { MailroomError, MailroomSchemas } from '../api.ts';
import type { Route } from '../route.ts';
import { useClient, useSession } from '../session.tsx';
import { ActionButton, ErrorNote, Form, Loading, PageHeading, Select, ShownOnce, TextField, useLoad, When } from '../ui.tsx';

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
  const [revokeError, setRevokeError] = useState<MailroomError | null>(null);

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
    if (!confirm(`Revoke the key “${key.name}”? Requests made with it will be refused at once.`)) return;
    const { error } = await client.DELETE('/api-keys/{api_key_id}', { params: { path: { api_key_id: key.id } } });
    setRevokeError(error ?? null);
    if (error) return;
    // Revoking the key this tab signed in with ends the session: its next call would be refused.
    const check = await client.GET('/api-keys', { params: { query: { limit: 1 } } });
    if (check.error?.name === 'invalid_api_key') signOut();
    else keys.reload();
  }

  return (
    <>
      <PageHeading title="API keys" />
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
      <ErrorNote error={keys.error ?? revokeError} />
      {keys.loading && !keys.data && <Loading what="API keys" />}
      {keys.data && (
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Permission</th>
              <th scope="col">Created</th>
              <th scope="col">Last used</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {keys.data.data.map((key) => (
              <tr key={key.id}>
                <td>{key.name}</td>
                <td>{PERMISSIONS.find((p) => p.value === key.permission)?.label}</td>
                <td>
                  <When iso={key.created_at} />
                </td>
                <td>
                  <When iso={key.last_used_at} />
                </td>
                <td>
                  <ActionButton class="danger" onClick={() => revoke(key)} aria-label={`Revoke ${key.name}`}>
                    Revoke
                  </ActionButton>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

export const apiKeyRoutes: Route[] = [{ path: '/api-keys', page: ApiKeys }];
