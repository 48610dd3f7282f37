// Suppressions: the addresses no email goes to, filtered by why; add one, remove one.
import { useState } from 'preact/hooks';
import type { MailroomSchemas } from '../api.ts';
import type { Route } from '../route.ts';
import { navigate, useLocation } from '../router.tsx';
import { useClient } from '../session.tsx';
import { ActionButton, ErrorNote, FirstPageLink, Form, Loading, PageHeading, Pager, Select, TextField, useAction, useCursor, useLoad, When } from '../ui.tsx';

type Origin = MailroomSchemas['SuppressionOrigin'];
const ORIGINS: Record<Origin, string> = { bounce: 'Bounce', complaint: 'Complaint', manual: 'Added by hand' };
const isOrigin = (value: string | null): value is Origin => value !== null && Object.hasOwn(ORIGINS, value);

function Suppressions() {
  const client = useClient();
  const cursor = useCursor();
  const given = useLocation().query.get('origin');
  const origin = isOrigin(given) ? given : undefined;
  const list = useLoad(() => client.GET('/suppressions', { params: { query: { limit: 50, ...(origin && { origin }), ...cursor } } }), [origin, cursor.after, cursor.before]);
  const [email, setEmail] = useState('');
  const [error, run] = useAction(list.reload);

  async function remove(suppression: MailroomSchemas['Suppression']) {
    if (!confirm(`Remove ${suppression.email} from the suppression list? Email to it will be sent again.`)) return;
    await run(() => client.DELETE('/suppressions/{suppression}', { params: { path: { suppression: suppression.id } } }));
  }

  return (
    <>
      <PageHeading title="Suppressions" />
      <div class="columns">
        <Form
          class="panel row"
          aria-label="Suppress an address"
          onSubmit={async () => {
            if (await run(() => client.POST('/suppressions', { body: { email: email.trim() } }))) setEmail('');
          }}
        >
          <TextField label="Email address" type="email" value={email} onValue={setEmail} required />
          <button type="submit">Suppress address</button>
        </Form>
        <Form class="panel row" aria-label="Filter">
          <Select
            label="Origin"
            value={origin ?? ''}
            onValue={(value) => navigate(value ? `/suppressions?origin=${value}` : '/suppressions')}
            options={[{ value: '', label: 'All' }, ...Object.entries(ORIGINS).map(([value, label]) => ({ value, label }))]}
          />
        </Form>
      </div>
      <ErrorNote error={list.error ?? error} />
      <FirstPageLink failed={Boolean(list.error)} path="/suppressions" extra={origin ? { origin } : {}} />
      {list.loading && <Loading what="suppressions" />}
      {list.data && (
        <>
          <table>
            <thead>
              <tr>
                <th scope="col">Address</th>
                <th scope="col">Origin</th>
                <th scope="col">Since</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.data.data.map((suppression) => (
                <tr key={suppression.id}>
                  <td>{suppression.email}</td>
                  <td>{ORIGINS[suppression.origin]}</td>
                  <td>
                    <When iso={suppression.created_at} />
                  </td>
                  <td>
                    <ActionButton class="danger" onClick={() => remove(suppression)}>
                      Remove<span class="visually-hidden"> {suppression.email}</span>
                    </ActionButton>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {list.data.data.length === 0 && <p>No suppressed addresses here.</p>}
          <Pager items={list.data.data} hasMore={list.data.has_more} path="/suppressions" extra={origin ? { origin } : {}} />
        </>
      )}
    </>
  );
}

export const suppressionRoutes: Route[] = [{ path: '/suppressions', page: Suppressions }];
