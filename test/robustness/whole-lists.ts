// What the whole-list suite needs: tables filled by the ten thousand, a client in a process of its own
// (so that its parsing does not run on the server's event loop), and two gauges of the server's
// process, in which the test server runs: how long its event loop goes without a turn, and how much
// memory it holds.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Tables } from '../../server/store/database.ts';

const BASE = Date.parse('2026-01-01T00:00:00.000Z');
/** Row `n`'s created_at: one millisecond apart, so that newest first is the reverse of the order made. */
const at = (n: number) => new Date(BASE + n).toISOString();
const ids = (count: number) => Array.from({ length: count }, () => randomUUID());

/** Inserts `count` rows made by `row`, a thousand a statement; returns their ids, newest first. */
async function fill<T extends keyof Tables & string>(db: Kysely<Tables>, table: T, count: number, row: (id: string, n: number) => Record<string, unknown>): Promise<string[]> {
  const made = ids(count);
  for (let from = 0; from < count; from += 1000) {
    const rows = made.slice(from, from + 1000).map((id, i) => row(id, from + i));
    await db.insertInto(table).values(rows as never).execute();
  }
  return made.reverse();
}

/** Suppressions with long addresses (about 250 characters), so that the whole list is tens of megabytes. */
export const fillSuppressions = (db: Kysely<Tables>, count: number) =>
  fill(db, 'suppressions', count, (id, n) => {
    const email = `${'x'.repeat(50)}${n}@${'d'.repeat(60)}.${'e'.repeat(60)}.${'f'.repeat(40)}.example.com`;
    return { id, email, email_key: email, origin: 'bounce', source_id: randomUUID(), created_at: at(n) };
  });

/** Contacts of about 800 bytes each. */
export const fillContacts = (db: Kysely<Tables>, count: number) =>
  fill(db, 'contacts', count, (id, n) => {
    const email = `bulk${n}@example.com`;
    return { id, email, email_key: email, first_name: 'Ada', last_name: null, unsubscribed: 0, properties: JSON.stringify({ padding: 'x'.repeat(600) }), created_at: at(n), updated_at: at(n) };
  });

export const fillSegments = (db: Kysely<Tables>, count: number) => fill(db, 'segments', count, (id, n) => ({ id, name: `Segment ${n}`, created_at: at(n) }));

export const fillTopics = (db: Kysely<Tables>, count: number) =>
  fill(db, 'topics', count, (id, n) => ({ id, name: `Topic ${n}`, description: 'News now and then', default_subscription: 'opt_in', visibility: 'public', created_at: at(n) }));

export const fillBroadcasts = (db: Kysely<Tables>, count: number, segmentId: string) =>
  fill(db, 'broadcasts', count, (id, n) => ({
    id,
    name: `Broadcast ${n}`,
    segment_id: segmentId,
    from_address: 'news@example.com',
    subject: 'News',
    reply_to: null,
    preview_text: null,
    html: '<p>News</p>',
    text: null,
    status: 'draft',
    topic_id: null,
    created_at: at(n),
    scheduled_at: null,
    sent_at: null,
  }));

export const fillTemplates = (db: Kysely<Tables>, count: number) =>
  fill(db, 'templates', count, (id, n) => ({
    id,
    alias: `template-${n}`,
    name: `Template ${n}`,
    status: 'draft',
    from_address: null,
    subject: 'Hello',
    reply_to: null,
    html: '<p>Hello</p>',
    text: null,
    variables: '[]',
    published: null,
    created_at: at(n),
    updated_at: at(n),
    published_at: null,
  }));

export const fillApiKeys = (db: Kysely<Tables>, count: number) =>
  fill(db, 'api_keys', count, (id, n) => ({ id, name: `Key ${n}`, permission: 'sending_access', key_hash: randomUUID(), key_hint: 're_abc', created_at: at(n), revoked_at: null, last_used_at: null }));

export const fillWebhooks = (db: Kysely<Tables>, count: number) =>
  fill(db, 'webhooks', count, (id, n) => ({
    id,
    endpoint: `https://hooks.example.com/${n}`,
    events: '["email.sent"]',
    signing_secret: 'whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0',
    status: 'disabled',
    status_reason: null,
    created_at: at(n),
    updated_at: at(n),
  }));

/** Domains never verified, so that no check of their records is due. */
export const fillDomains = (db: Kysely<Tables>, count: number) =>
  fill(db, 'domains', count, (id, n) => ({
    id,
    name: `mail${n}.example.com`,
    status: 'not_started',
    record_status: '{}',
    region: 'us-east-1',
    return_path: 'send',
    open_tracking: 0,
    click_tracking: 0,
    tls: 'opportunistic',
    tracking_subdomain: null,
    sending: 'enabled',
    receiving: 'disabled',
    dkim_selector: 'resend',
    dkim_private_key: 'not a key: never used',
    dkim_public_key: 'not a key: never used',
    dkim_next_selector: null,
    dkim_next_private_key: null,
    dkim_next_public_key: null,
    verified_at: null,
    next_check_at: null,
    created_at: at(n),
    updated_at: at(n),
  }));

/** Makes each contact a member of each segment (contacts and segments by id), as the contacts' created_at and now say. */
export async function join(db: Kysely<Tables>, contactIds: string[], segmentIds: string[]): Promise<void> {
  const contacts = new Map<string, string>();
  for (let from = 0; from < contactIds.length; from += 1000) {
    const rows = await db.selectFrom('contacts').select(['id', 'created_at']).where('id', 'in', contactIds.slice(from, from + 1000)).execute();
    for (const row of rows) contacts.set(row.id, row.created_at);
  }
  const pairs = segmentIds.flatMap((segment_id) => contactIds.map((contact_id) => ({ segment_id, contact_id })));
  for (let from = 0; from < pairs.length; from += 1000) {
    const rows = pairs.slice(from, from + 1000).map((pair, i) => ({ ...pair, contact_created_at: contacts.get(pair.contact_id)!, created_at: at(from + i) }));
    await db.insertInto('segment_contacts').values(rows).execute();
  }
}

/**
 * GET `url` from a process of its own, the body written to `file`; resolves with the status and
 * content type once the body has all arrived.
 */
export function fetchInChild(url: string, apiKey: string, file: string): Promise<{ status: number; contentType: string }> {
  const script = `
    import { createWriteStream } from 'node:fs';
    import { Readable } from 'node:stream';
    import { pipeline } from 'node:stream/promises';
    const [url, key, file] = process.argv.slice(1);
    const res = await fetch(url, { headers: { authorization: 'Bearer ' + key } });
    await pipeline(Readable.fromWeb(res.body), createWriteStream(file));
    process.stdout.write(JSON.stringify({ status: res.status, contentType: res.headers.get('content-type') }));`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, url, apiKey, file], { stdio: ['ignore', 'pipe', 'inherit'] });
    let said = '';
    child.stdout.on('data', (chunk) => (said += chunk));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(said)) : reject(new Error(`the client process exited with ${code}`))));
  });
}

/**
 * The longest stretch this process's event loop went without a turn, counted in the CPU time the
 * process spent meanwhile (no more than the wall-clock time either): on a shared machine the system
 * may hold a process off its core for a while, which is no block of the event loop's making.
 */
export function turnGauge(): () => number {
  let longest = 0;
  let running = true;
  let lastWall = performance.now();
  let lastCpu = process.cpuUsage();
  const tick = () => {
    const wall = performance.now();
    const cpu = process.cpuUsage();
    const cpuMs = (cpu.user - lastCpu.user + cpu.system - lastCpu.system) / 1000;
    longest = Math.max(longest, Math.min(wall - lastWall, cpuMs));
    lastWall = wall;
    lastCpu = cpu;
    if (running) setTimeout(tick, 1);
  };
  setTimeout(tick, 1);
  return () => {
    running = false;
    return longest;
  };
}

/** Memory the process holds in JavaScript objects and in buffers. */
export const heldBytes = () => {
  const { heapUsed, external } = process.memoryUsage();
  return heapUsed + external;
};

/** The most memory the process held beyond what it held at the start, sampled every few milliseconds. */
export function memoryGauge(): () => number {
  const start = heldBytes();
  let most = start;
  const timer = setInterval(() => (most = Math.max(most, heldBytes())), 5);
  return () => {
    clearInterval(timer);
    return Math.max(most, heldBytes()) - start;
  };
}
