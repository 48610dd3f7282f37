// API keys: create (the token shown once), list, rename and revoke, under /api-keys. Tokens are kept
// only as hashes (./key.ts); the last full access key cannot be revoked, so the server stays manageable.
import type { OperationHandler, Schemas } from '../api.ts';
import { invalid, notFound } from '../http/errors.ts';
import { cursorOf, listing } from '../http/paging.ts';
import type { StreamedLists } from '../http/streamedList.ts';
import type { ApiKeyRecord } from '../store/apiKeys.ts';
import type { Store } from '../store/index.ts';
import { createKey } from './key.ts';
import type { Handlers } from '../http/operationRouter.ts';

const toApiKey = ({ id, name, permission, domain_id, created_at, last_used_at }: ApiKeyRecord): Schemas['ApiKey'] => ({ id, name, permission, domain_id, created_at, last_used_at });

/** `lists` writes the list asked for without `limit`. */
export function apiKeyHandlers(store: Store, lists: StreamedLists): Handlers {
  const streamApiKeys = lists.of('ApiKeyList', toApiKey);

  const createApiKey: OperationHandler<'createApiKey'> = async (req, res) => {
    const { domain_id: domainId = null } = req.body;
    if (domainId !== null && !(await store.domains.find(domainId))) throw invalid(`The domain \`${domainId}\` does not exist.`);
    const { id, key } = await createKey(store, req.body.name, req.body.permission ?? 'full_access', domainId);
    res.status(201).json({ id, token: key });
  };

  const listApiKeys: OperationHandler<'listApiKeys'> = async (req, res) => {
    const { limit } = req.query;
    const cursor = cursorOf(req.query);
    if (limit === undefined) return listing('API key', () => streamApiKeys(res, store.apiKeys.streamLive(cursor)));
    const page = await listing('API key', () => store.apiKeys.pageLive(limit, cursor));
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map(toApiKey) });
  };

  const updateApiKey: OperationHandler<'updateApiKey'> = async (req, res) => {
    if (!(await store.apiKeys.rename(req.params.api_key_id, req.body.name))) throw notFound('API key');
    res.json({ object: 'api_key', id: req.params.api_key_id });
  };

  const deleteApiKey: OperationHandler<'deleteApiKey'> = async (req, res) => {
    const outcome = await store.apiKeys.revokeUnlessLast(req.params.api_key_id, new Date().toISOString());
    if (outcome === 'not_found') throw notFound('API key');
    if (outcome === 'last_full_access') throw invalid('This is the last full access key; create another before revoking it.');
    res.json({ object: 'api_key', id: req.params.api_key_id, deleted: true });
  };

  return { listApiKeys, createApiKey, updateApiKey, deleteApiKey };
}
