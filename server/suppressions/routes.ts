// Suppressions: add (one, or up to 100), list (by origin), retrieve and delete by id or address,
// remove in bulk. Addresses are matched without regard to case, as contacts' are.
import type { OperationHandler, PathParams, Schemas } from '../api.ts';
import { notFound } from '../http/errors.ts';
import { cursorOf, listing } from '../http/paging.ts';
import type { StreamedLists } from '../http/streamedList.ts';
import type { Store } from '../store/index.ts';
import type { SuppressionKey, SuppressionRecord } from '../store/suppressions.ts';
import type { Handlers } from '../http/operationRouter.ts';

/** `lists` writes the list asked for without `limit`. */
export function suppressionHandlers(store: Store, lists: StreamedLists): Handlers {
  const suppressions = store.suppressions;
  const streamSuppressions = lists.of('SuppressionList', toSuppression);

  const createSuppression: OperationHandler<'createSuppression'> = async (req, res) => {
    const [{ record, created }] = await suppressions.add([req.body.email]);
    res.status(created ? 201 : 200).json({ object: 'suppression', id: record!.id });
  };

  const addSuppressions: OperationHandler<'addSuppressions'> = async (req, res) => {
    const added = await suppressions.add(req.body.emails);
    res.status(201).json({ data: added.map(({ record }) => ({ object: 'suppression', id: record.id })) });
  };

  const listSuppressions: OperationHandler<'listSuppressions'> = async (req, res) => {
    const { origin, limit } = req.query;
    const cursor = cursorOf(req.query);
    if (limit === undefined) return listing('suppression', () => streamSuppressions(res, suppressions.stream(origin, cursor)));
    const page = await listing('suppression', () => suppressions.page(origin, limit, cursor));
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map(toSuppression) });
  };

  const getSuppression: OperationHandler<'getSuppression'> = async (req, res) => {
    const record = await suppressions.find(suppressionKey(req.params));
    if (!record) throw notFound('Suppression');
    res.json(toSuppression(record));
  };

  const deleteSuppression: OperationHandler<'deleteSuppression'> = async (req, res) => {
    const [by, value] = suppressionKey(req.params);
    const [id] = await suppressions.remove(by, [value]);
    if (!id) throw notFound('Suppression');
    res.json({ object: 'suppression', id, deleted: true });
  };

  const removeSuppressions: OperationHandler<'removeSuppressions'> = async (req, res) => {
    const { emails, ids } = req.body;
    const removed = emails ? await suppressions.remove('email_key', emails.map((email) => email.toLowerCase())) : await suppressions.remove('id', ids ?? []);
    res.json({ data: removed.map((id) => ({ object: 'suppression', id, deleted: true })) });
  };

  return { listSuppressions, createSuppression, addSuppressions, removeSuppressions, getSuppression, deleteSuppression };
}

export function toSuppression(record: SuppressionRecord): Schemas['Suppression'] {
  return { object: 'suppression', id: record.id, email: record.email, origin: record.origin, source_id: record.source_id, created_at: record.created_at };
}

/** The path names a suppression by id or by address; addresses are matched without regard to case. */
function suppressionKey({ suppression }: PathParams<'getSuppression'>): SuppressionKey {
  return suppression.includes('@') ? ['email_key', suppression.toLowerCase()] : ['id', suppression];
}
