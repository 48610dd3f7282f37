// The email log, newest first, filtered by status. One email's page is ./email.tsx.
import { Addresses, List, useCursor } from '../list.tsx';
import { useLoad } from '../load.ts';
import type { Route } from '../route.ts';
import { navigate, useLocation } from '../router.tsx';
import { useClient } from '../session.tsx';
import { Form, Link, PageHeading, Select, When } from '../ui.tsx';
import { EmailPage } from './email.tsx';
import { EmailStatus, isStatus, STATUS_LABELS, type Status } from './emailStatus.tsx';

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
      <List
        what="emails"
        loaded={list}
        paged={{ path: '/emails', extra: filter.last_event ? { last_event: filter.last_event } : {} }}
        empty="No emails here."
        columns={[
          { heading: 'Subject', cell: (email) => <Link to={`/emails/${email.id}`}>{email.subject || '(no subject)'}</Link> },
          { heading: 'To', cell: (email) => <Addresses emails={email.to} /> },
          { heading: 'Status', cell: (email) => <EmailStatus status={email.last_event} /> },
          { heading: 'Created', cell: (email) => <When iso={email.created_at} /> },
        ]}
      />
    </>
  );
}

export const emailRoutes: Route[] = [
  { path: '/emails', page: EmailLog },
  { path: '/emails/:id', page: EmailPage },
];
