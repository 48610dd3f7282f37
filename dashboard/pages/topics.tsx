// Topics: the list, deleting one, and a new one.
import { useState } from 'preact/hooks';
import type { MailroomSchemas } from '../api.ts';
import { List } from '../list.tsx';
import { useAction, useLoad } from '../load.ts';
import type { Route } from '../route.ts';
import { useClient } from '../session.tsx';
import { ErrorNote, Form, PageHeading, Select, TextField } from '../ui.tsx';

type Subscription = MailroomSchemas['TopicSubscription'];
type Visibility = MailroomSchemas['TopicVisibility'];
const SUBSCRIPTIONS: Record<Subscription, string> = { opt_in: 'Subscribed unless they opt out', opt_out: 'Not subscribed unless they opt in' };
const VISIBILITIES: Record<Visibility, string> = { public: 'Public', private: 'Private' };
const options = (labels: Record<string, string>) => Object.entries(labels).map(([value, label]) => ({ value, label }));

function Topics() {
  const client = useClient();
  const topics = useLoad(() => client.GET('/topics'), []);
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [subscription, setSubscription] = useState<Subscription>('opt_in');
  const [visibility, setVisibility] = useState<Visibility>('public');
  const [error, run] = useAction(topics.reload);

  return (
    <>
      <PageHeading title="Topics" />
      <List
        what="topics"
        loaded={topics}
        empty="No topics yet."
        columns={[
          { heading: 'Name', cell: (topic) => topic.name },
          { heading: 'Description', cell: (topic) => topic.description ?? '' },
          { heading: 'Default', cell: (topic) => (topic.default_subscription === 'opt_in' ? 'Opted in' : 'Opted out') },
          { heading: 'Visibility', cell: (topic) => VISIBILITIES[topic.visibility] },
        ]}
        remove={{
          verb: 'Delete',
          name: (topic) => topic.name,
          confirm: (topic) => `Delete the topic “${topic.name}”? Contacts' choices about it go with it.`,
          call: (topic) => client.DELETE('/topics/{topic_id}', { params: { path: { topic_id: topic.id } } }),
        }}
      />
      <Form
        class="panel"
        aria-labelledby="new-topic"
        onSubmit={async () => {
          if (!(await run(() => client.POST('/topics', { body: { name: name.trim(), default_subscription: subscription, visibility, ...(description && { description }) } })))) return;
          setName('');
          setDescription('');
        }}
      >
        <h2 id="new-topic">New topic</h2>
        <div class="row">
          <TextField label="Name" value={name} onValue={setName} required />
          <TextField label="Description" value={description} onValue={setDescription} />
        </div>
        <div class="row">
          <Select label="Default subscription" value={subscription} onValue={(value) => setSubscription(value as Subscription)} options={options(SUBSCRIPTIONS)} />
          <Select label="Visibility" value={visibility} onValue={(value) => setVisibility(value as Visibility)} options={options(VISIBILITIES)} />
        </div>
        <ErrorNote error={error} />
        <button type="submit">Create topic</button>
      </Form>
    </>
  );
}

export const topicRoutes: Route[] = [{ path: '/topics', page: Topics }];
