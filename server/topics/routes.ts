// Topics (create, list, retrieve, update, delete) and a contact's subscriptions to them (list, update),
// under /topics and /contacts/{contact_id}/topics.
import { randomUUID } from 'node:crypto';
import type { OperationHandler, Schemas } from '../api.ts';
import { contactKey } from '../contacts/contact.ts';
import { invalid, notFound } from '../http/errors.ts';
import { cursorOf, listing } from '../http/paging.ts';
import type { StreamedLists } from '../http/streamedList.ts';
import type { Store } from '../store/index.ts';
import type { SubscribedTopic, TopicRecord } from '../store/topics.ts';
import type { Handlers } from '../http/operationRouter.ts';

/** `lists` writes the lists asked for without `limit`. */
export function topicHandlers(store: Store, lists: StreamedLists): Handlers {
  const topics = store.topics;
  const streamTopics = lists.of('TopicList', toTopic);
  const streamContactTopics = lists.of('ContactTopicList', toContactTopic);

  const createTopic: OperationHandler<'createTopic'> = async (req, res) => {
    const { name, description, default_subscription, visibility } = req.body;
    const record = { id: randomUUID(), name, description: description ?? null, default_subscription, visibility: visibility ?? 'private', created_at: new Date().toISOString() };
    await topics.insert(record);
    res.status(201).json({ object: 'topic', id: record.id });
  };

  const listTopics: OperationHandler<'listTopics'> = async (req, res) => {
    const { limit } = req.query;
    const cursor = cursorOf(req.query);
    if (limit === undefined) return listing('topic', () => streamTopics(res, topics.stream(cursor)));
    const page = await listing('topic', () => topics.page(limit, cursor));
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map(toTopic) });
  };

  const getTopic: OperationHandler<'getTopic'> = async (req, res) => {
    const record = await topics.find(req.params.topic_id);
    if (!record) throw notFound('Topic');
    res.json(toTopic(record));
  };

  const updateTopic: OperationHandler<'updateTopic'> = async (req, res) => {
    const { topic_id } = req.params;
    const { id, name, description, visibility, default_subscription } = req.body;
    // The Resend SDK sends the id in the body as well as in the path.
    if (id !== undefined && id !== topic_id) throw invalid(`The \`id\` in the body (${id}) is not the topic in the path (${topic_id}).`);
    // Runs inside the store's transaction: refusing here changes nothing.
    const record = await topics.update(topic_id, (current) => {
      if (default_subscription !== undefined && default_subscription !== current.default_subscription) {
        throw invalid(`The \`default_subscription\` of a topic cannot be changed after it is created; this one's is \`${current.default_subscription}\`.`);
      }
      return { ...(name !== undefined && { name }), ...(description !== undefined && { description }), ...(visibility !== undefined && { visibility }) };
    });
    if (!record) throw notFound('Topic');
    res.json({ object: 'topic', id: record.id });
  };

  const deleteTopic: OperationHandler<'deleteTopic'> = async (req, res) => {
    const { topic_id } = req.params;
    if (!(await topics.delete(topic_id))) throw notFound('Topic');
    res.json({ object: 'topic', id: topic_id, deleted: true });
  };

  const listContactTopics: OperationHandler<'listContactTopics'> = async (req, res) => {
    const { limit } = req.query;
    const cursor = cursorOf(req.query);
    if (limit === undefined) return listing('topic', () => streamContactTopics(res, topics.streamOfContact(contactKey(req.params), cursor)));
    const page = await listing('topic', () => topics.ofContact(contactKey(req.params), limit, cursor));
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map(toContactTopic) });
  };

  const updateContactTopics: OperationHandler<'updateContactTopics'> = async (req, res) => {
    // The Resend SDK sends a bare array; Resend's own reference documents `{"topics": [...]}`.
    const choices = Array.isArray(req.body) ? req.body : req.body.topics;
    const { contactId, choices: recorded } = await topics.choose(contactKey(req.params), choices);
    res.json({ object: 'contact_topics', id: contactId, topics: recorded });
  };

  return { createTopic, listTopics, getTopic, updateTopic, deleteTopic, listContactTopics, updateContactTopics };
}

function toTopic(record: TopicRecord): Schemas['Topic'] {
  const { id, name, description, default_subscription, visibility, created_at } = record;
  return { object: 'topic', id, name, description, default_subscription, visibility, created_at };
}

function toContactTopic({ id, name, description, subscription }: SubscribedTopic): Schemas['ContactTopic'] {
  return { id, name, description, subscription };
}
