// Broadcasts: the list with each one's status, and the page of one (./broadcast.tsx).
import { List, useCursor } from '../list.tsx';
import { useLoad } from '../load.ts';
import type { Route } from '../route.ts';
import { useClient } from '../session.tsx';
import { Link, PageHeading, When } from '../ui.tsx';
import { BroadcastPage, NewBroadcast } from './broadcast.tsx';

function Broadcasts() {
  const client = useClient();
  const cursor = useCursor();
  const list = useLoad(() => client.GET('/broadcasts', { params: { query: { limit: 50, ...cursor } } }), [cursor.after, cursor.before]);
  return (
    <>
      <PageHeading title="Broadcasts">
        <Link to="/broadcasts/new">New broadcast</Link>
      </PageHeading>
      <List
        what="broadcasts"
        loaded={list}
        paged={{ path: '/broadcasts' }}
        empty="No broadcasts yet."
        columns={[
          { heading: 'Name', cell: (broadcast) => <Link to={`/broadcasts/${broadcast.id}`}>{broadcast.name || 'Untitled broadcast'}</Link> },
          { heading: 'Status', cell: (broadcast) => <span class={`status status-${broadcast.status}`}>{broadcast.status}</span> },
          { heading: 'Created', cell: (broadcast) => <When iso={broadcast.created_at} /> },
          { heading: 'Scheduled for', cell: (broadcast) => <When iso={broadcast.scheduled_at} /> },
          { heading: 'Sent', cell: (broadcast) => <When iso={broadcast.sent_at} /> },
        ]}
      />
    </>
  );
}

export const broadcastRoutes: Route[] = [
  { path: '/broadcasts', page: Broadcasts },
  { path: '/broadcasts/new', page: NewBroadcast },
  { path: '/broadcasts/:id', page: BroadcastPage },
];
