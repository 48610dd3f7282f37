// Segments: the list, a new one, deleting one; and a segment's members, a page at a time.
import { useState } from 'preact/hooks';
import type { MailroomSchemas } from '../api.ts';
import type { Route } from '../route.ts';
import { useClient } from '../session.tsx';
import { ActionButton, ErrorNote, FirstPageLink, Form, Link, Loading, PageHeading, Pager, TextField, useAction, useCursor, useLoad, When } from '../ui.tsx';

function Segments() {
  const client = useClient();
  const segments = useLoad(() => client.GET('/segments'), []);
  const [name, setName] = useState('');
  const [error, run] = useAction(segments.reload);

  async function remove(segment: MailroomSchemas['Segment']) {
    if (!confirm(`Delete the segment “${segment.name}”? Its contacts stay; only the segment goes.`)) return;
    await run(() => client.DELETE('/segments/{segment_id}', { params: { path: { segment_id: segment.id } } }));
  }

  return (
    <>
      <PageHeading title="Segments" />
      <Form
        class="panel row"
        aria-label="New segment"
        onSubmit={async () => {
          if (await run(() => client.POST('/segments', { body: { name: name.trim() } }))) setName('');
        }}
      >
        <TextField label="Name" value={name} onValue={setName} required />
        <button type="submit">Create segment</button>
      </Form>
      <ErrorNote error={segments.error ?? error} />
      {segments.loading && !segments.data && <Loading what="segments" />}
      {segments.data && (
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {segments.data.data.map((segment) => (
              <tr key={segment.id}>
                <td>
                  <Link to={`/segments/${segment.id}`}>{segment.name}</Link>
                </td>
                <td>
                  <When iso={segment.created_at} />
                </td>
                <td>
                  <ActionButton class="danger" onClick={() => remove(segment)}>
                    Delete<span class="visually-hidden"> {segment.name}</span>
                  </ActionButton>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {segments.data?.data.length === 0 && <p>No segments yet.</p>}
    </>
  );
}

function SegmentMembers({ id }: Record<string, string>) {
  const client = useClient();
  const cursor = useCursor();
  const segment = useLoad(() => client.GET('/segments/{segment_id}', { params: { path: { segment_id: id! } } }), [id]);
  const members = useLoad(
    () => client.GET('/segments/{segment_id}/contacts', { params: { path: { segment_id: id! }, query: { limit: 50, ...cursor } } }),
    [id, cursor.after, cursor.before],
  );
  const [error, run] = useAction(members.reload);
  return (
    <>
      <PageHeading title={segment.data ? `Segment: ${segment.data.name}` : 'Segment'} />
      <p>
        <Link to="/segments">All segments</Link>
      </p>
      <ErrorNote error={segment.error ?? members.error ?? error} />
      <FirstPageLink failed={Boolean(members.error)} path={`/segments/${id}`} />
      {members.loading && <Loading what="members" />}
      {members.data && (
        <>
          <table>
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Name</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {members.data.data.map((contact) => (
                <tr key={contact.id}>
                  <td>
                    <Link to={`/contacts/${contact.id}`}>{contact.email}</Link>
                  </td>
                  <td>{[contact.first_name, contact.last_name].filter(Boolean).join(' ')}</td>
                  <td>
                    <ActionButton
                      class="secondary"
                      onClick={() => run(() => client.DELETE('/contacts/{contact_id}/segments/{segment_id}', { params: { path: { contact_id: contact.id, segment_id: id! } } }))}
                    >
                      Remove<span class="visually-hidden"> {contact.email}</span>
                    </ActionButton>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {members.data.data.length === 0 && <p>No contacts in this segment.</p>}
          <Pager items={members.data.data} hasMore={members.data.has_more} path={`/segments/${id}`} />
        </>
      )}
    </>
  );
}

export const segmentRoutes: Route[] = [
  { path: '/segments', page: Segments },
  { path: '/segments/:id', page: SegmentMembers },
];
