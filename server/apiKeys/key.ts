// API keys: `re_` plus 32 random base62 characters, kept only as a SHA-256 hash. The keys are random
// enough that a fast hash is safe, and fast matters: every request is authenticated.
import { hash, randomBytes, randomUUID } from 'node:crypto';
import type { ApiKeyRecord } from '../store/apiKeys.ts';
import type { Store } from '../store/index.ts';

export type Permission = ApiKeyRecord['permission'];
export const PERMISSIONS: readonly Permission[] = ['full_access', 'sending_access'];

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export function generateKey(): string {
  // 256 values folded onto 62 would bias; rejection sampling keeps every character uniform.
  let key = 're_';
  while (key.length < 35) {
    for (const byte of randomBytes(48)) if (byte < 248 && key.length < 35) key += BASE62[byte % 62];
  }
  return key;
}

/** The key's SHA-256, in hex: what the store keeps and looks keys up by. */
export const hashKey = (key: string): string => hash('sha256', key);

/** `domainId`: the one domain the key may send from. */
export async function createKey(store: Store, name: string, permission: Permission, domainId: string | null = null): Promise<{ id: string; key: string }> {
  const id = randomUUID();
  const key = generateKey();
  await store.apiKeys.insert(keyRecord(id, name, permission, key, domainId));
  return { id, key };
}

function keyRecord(id: string, name: string, permission: Permission, key: string, domainId: string | null = null): ApiKeyRecord {
  return { id, name, permission, key_hash: hashKey(key), key_hint: key.slice(0, 7), created_at: new Date().toISOString(), revoked_at: null, last_used_at: null, domain_id: domainId };
}

/**
 * At start: seeds MAILROOM_API_KEY when it is set and not yet stored; otherwise, on a store with no
 * keys at all, creates one and returns it so that it can be printed once. Several processes starting
 * together on one database may all seed the same key: the first insert wins, the others find it there.
 */
export async function ensureKey(store: Store, seed: string | undefined): Promise<string | undefined> {
  if (seed) {
    await store.apiKeys.insertUnlessExists(keyRecord(randomUUID(), 'MAILROOM_API_KEY', 'full_access', seed));
    return undefined;
  }
  if ((await store.apiKeys.count()) > 0) return undefined;
  return (await createKey(store, 'default', 'full_access')).key;
}
