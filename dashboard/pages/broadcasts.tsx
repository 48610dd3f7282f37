// Broadcasts: the list with each one's status, and the page of one (./broadcast.tsx).
import type { Route } from '../route.ts';
import { useClient } from '../session.tsx';
import { ErrorNote, FirstPageLink, Link, Loading, PageHeading, Pager, useCursor, useLoad, When } from '../ui.tsx';
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
      <ErrorNote error={list.error} />
      <FirstPageLink failed={Boolean(list.error)} path="/broadcasts" />
      {list.loading && <Loading what="broadcasts" />}
      {list.data && (
        <>
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
                <th scope="col">Scheduled for</th>
                <th scope="col">Sent</th>
              </tr>
            </thead>
            <tbody>
              {list.data.data.map((broadcast) => (
                <tr key={broadcast.id}>
                  <td>
                    <Link to={`/broadcasts/${broadcast.id}`}>{broadcast.name || 'Untitled broadcast'}</Link>
                  </td>
                  <td>
                    <span class={`status status-${broadcast.status}`}>{broadcast.status}</span>
                  </td>
                  <td>
                    <When iso={broadcast.created_at} />
                  </td>
                  <td>
                    <When iso={broadcast.scheduled_at} />
                  </td>
                  <td>
                    <When iso={broadcast.sent_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {list.data.data.length === 0 && <p>No broadcasts yet.</p>}
          <Pager items={list.data.data} hasMore={list.data.has_more} path="/broadcasts" />
        </>
      )}
    </>
  );
}

export const broadcastRoutes: Route[] = [
  { path: '/broadcasts', page: Broadcasts },
  { path: '/broadcasts/new', page: NewBroadcast },
  { path: '/broadcasts/:id', page: BroadcastPage },
];
