// Suppressions: the addresses no email goes to, filtered by why; remove one, add one.
import { useState } from 'preact/hooks';
import type { MailroomSchemas } from '../api.ts';
import { Address, List, useCursor } from '../list.tsx';
import { useAction, useLoad } from '../load.ts';
import type { Route } from '../route.ts';
import { navigate, useLocation } from '../router.tsx';
import { useClient } from '../session.tsx';
import { ErrorNote, Form, PageHeading, Select, TextField, When } from '../ui.tsx';

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
  return (
    <>
      <PageHeading title="Suppressions" />
      <Form class="panel row" aria-label="Filter">
        <Select
          label="Origin"
          value={origin ?? ''}
          onValue={(value) => navigate(value ? `/suppressions?origin=${value}` : '/suppressions')}
          options={[{ value: '', label: 'All' }, ...Object.entries(ORIGINS).map(([value, label]) => ({ value, label }))]}
        />
      </Form>
      <List
        what="suppressions"
        loaded={list}
        paged={{ path: '/suppressions', extra: origin ? { origin } : {} }}
        empty="No suppressed addresses here."
        columns={[
          { heading: 'Address', cell: (suppression) => <Address email={suppression.email} /> },
          { heading: 'Origin', cell: (suppression) => ORIGINS[suppression.origin] },
          { heading: 'Since', cell: (suppression) => <When iso={suppression.created_at} /> },
        ]}
        remove={{
          verb: 'Remove',
          name: (suppression) => suppression.email,
          confirm: (suppression) => `Remove ${suppression.email} from the suppression list? Email to it will be sent again.`,
          call: (suppression) => client.DELETE('/suppressions/{suppression}', { params: { path: { suppression: suppression.id } } }),
        }}
      />
      <Form
        class="panel"
        aria-label="Suppress an address"
        onSubmit={async () => {
          if (await run(() => client.POST('/suppressions', { body: { email: email.trim() } }))) setEmail('');
        }}
      >
        <div class="row">
          <TextField label="Email address" type="email" value={email} onValue={setEmail} required />
          <button type="submit">Suppress address</button>
        </div>
        <ErrorNote error={error} />
      </Form>
    </>
  );
}

export const suppressionRoutes: Route[] = [{ path: '/suppressions', page: Suppressions }];
