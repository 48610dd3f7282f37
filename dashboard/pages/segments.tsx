// Segments: the list, deleting one, and a new one; and a segment's members, a page at a time.
import { useState } from 'preact/hooks';
import { Address, List, useCursor } from '../list.tsx';
import { useAction, useLoad } from '../load.ts';
import type { Route } from '../route.ts';
import { useClient } from '../session.tsx';
import { ActionButton, ErrorNote, Form, Link, PageHeading, TextField, When } from '../ui.tsx';

function Segments() {
  const client = useClient();
  const segments = useLoad(() => client.GET('/segments'), []);
  const [name, setName] = useState('');
  const [error, run] = useAction(segments.reload);
  return (
    <>
      <PageHeading title="Segments" />
      <List
        what="segments"
        loaded={segments}
        empty="No segments yet."
        columns={[
          { heading: 'Name', cell: (segment) => <Link to={`/segments/${segment.id}`}>{segment.name}</Link> },
          { heading: 'Created', cell: (segment) => <When iso={segment.created_at} /> },
        ]}
        remove={{
          verb: 'Delete',
          name: (segment) => segment.name,
          confirm: (segment) => `Delete the segment “${segment.name}”? Its contacts stay; only the segment goes.`,
          call: (segment) => client.DELETE('/segments/{segment_id}', { params: { path: { segment_id: segment.id } } }),
        }}
      />
      <Form
        class="panel"
        aria-label="New segment"
        onSubmit={async () => {
          if (await run(() => client.POST('/segments', { body: { name: name.trim() } }))) setName('');
        }}
      >
        <div class="row">
          <TextField label="Name" value={name} onValue={setName} required />
          <button type="submit">Create segment</button>
        </div>
        <ErrorNote error={error} />
      </Form>
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
  return (
    <>
      <PageHeading title={segment.data ? `Segment: ${segment.data.name}` : 'Segment'} />
      <p>
        <Link to="/segments">All segments</Link>
      </p>
      <List
        what="members"
        loaded={members}
        error={segment.error}
        paged={{ path: `/segments/${id}` }}
        empty="No contacts in this segment."
        columns={[
          { heading: 'Email', cell: (contact) => <Address email={contact.email} to={`/contacts/${contact.id}`} /> },
          { heading: 'Name', cell: (contact) => [contact.first_name, contact.last_name].filter(Boolean).join(' ') },
        ]}
        actions={(contact, run) => (
          // Out of the segment only: the contact stays, so nothing is asked first.
          <ActionButton class="secondary" onClick={() => run(() => client.DELETE('/contacts/{contact_id}/segments/{segment_id}', { params: { path: { contact_id: contact.id, segment_id: id! } } }))}>
            Remove<span class="visually-hidden"> {contact.email}</span>
          </ActionButton>
        )}
      />
    </>
  );
}

export const segmentRoutes: Route[] = [
  { path: '/segments', page: Segments },
  { path: '/segments/:id', page: SegmentMembers },
];
