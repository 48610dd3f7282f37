// Contacts: the list, newest first, a page at a time.
import type { Route } from '../route.ts';
import { useClient } from '../session.tsx';
import { ErrorNote, Link, Loading, PageHeading, Pager, useCursor, useLoad, When } from '../ui.tsx';

const PAGE_SIZE = 50;

function ContactList() {
  const client = useClient();
  const cursor = useCursor();
  const list = useLoad(() => client.contacts.list({ limit: PAGE_SIZE, ...cursor }), [cursor.after, cursor.before]);
  return (
    <>
      <PageHeading title="Contacts" />
      <ErrorNote error={list.error} />
      {list.loading && <Loading what="contacts" />}
      {list.data && (
        <>
          <table>
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Name</th>
                <th scope="col">Subscribed</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {list.data.data.map((contact) => (
                <tr key={contact.id}>
                  <td>
                    <Link to={`/contacts/${contact.id}`}>{contact.email}</Link>
                  </td>
                  <td>{[contact.first_name, contact.last_name].filter(Boolean).join(' ')}</td>
                  <td>{contact.unsubscribed ? 'Unsubscribed' : 'Subscribed'}</td>
                  <td>
                    <When iso={contact.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {list.data.data.length === 0 && <p>No contacts here.</p>}
          <Pager items={list.data.data} hasMore={list.data.has_more} path="/contacts" />
        </>
      )}
    </>
  );
}

export const contactRoutes: Route[] = [{ path: '/contacts', page: ContactList }];
