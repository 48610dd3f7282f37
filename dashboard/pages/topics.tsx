// Topics: the list, a new one, deleting one.
import { useState } from 'preact/hooks';
import type { MailroomSchemas } from '../api.ts';
import type { Route } from '../route.ts';
import { useClient } from '../session.tsx';
import { ActionButton, ErrorNote, Form, Loading, PageHeading, Select, TextField, useAction, useLoad } from '../ui.tsx';

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

  async function remove(topic: MailroomSchemas['Topic']) {
    if (!confirm(`Delete the topic “${topic.name}”? Contacts' choices about it go with it.`)) return;
    await run(() => client.DELETE('/topics/{topic_id}', { params: { path: { topic_id: topic.id } } }));
  }

  return (
    <>
      <PageHeading title="Topics" />
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
      <ErrorNote error={topics.error} />
      {topics.loading && !topics.data && <Loading what="topics" />}
      {topics.data && (
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Description</th>
              <th scope="col">Default</th>
              <th scope="col">Visibility</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {topics.data.data.map((topic) => (
              <tr key={topic.id}>
                <td>{topic.name}</td>
                <td>{topic.description ?? ''}</td>
                <td>{topic.default_subscription === 'opt_in' ? 'Opted in' : 'Opted out'}</td>
                <td>{topic.visibility === 'public' ? 'Public' : 'Private'}</td>
                <td>
                  <ActionButton class="danger" onClick={() => remove(topic)}>
                    Delete<span class="visually-hidden"> {topic.name}</span>
                  </ActionButton>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {topics.data?.data.length === 0 && <p>No topics yet.</p>}
    </>
  );
}

export const topicRoutes: Route[] = [{ path: '/topics', page: Topics }];
