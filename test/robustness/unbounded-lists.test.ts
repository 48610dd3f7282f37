// Lists asked for without `limit` are the whole list, however long: 20,000 contacts, 50,000
// suppressions, 20,000 of everything else. Each answer must be complete, valid against the contract
// and newest first, while the server, running in this process, never goes 50 ms without a turn of its
// event loop and never holds memory in proportion to the list; nor when its client stops reading.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { performance } from 'node:perf_hooks';
import { join as joinPath } from 'node:path';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSpec, schemaCompiler } from '../../server/contract.ts';
import type { Tables } from '../../server/store/database.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, TEST_KEY, type TestServer } from '../support/server.ts';
import { fetchInChild, fillApiKeys, fillBroadcasts, fillContacts, fillDomains, fillSegments, fillSuppressions, fillTemplates, fillTopics, fillWebhooks, join, memoryGauge, turnGauge } from './whole-lists.ts';

const CONTACTS = 20_000;
const SUPPRESSIONS = 50_000;
const OTHERS = 20_000;
/** The longest the event loop may go without a turn while a list streams. */
const LONGEST_TURN_MS = 50;
/** The most memory a whole list may add: the whole suppression list is over 20 MB as JSON, and several times that as rows. */
const MEMORY_BOUND = 40 * 2 ** 20;
/** How long the server may take to answer a stalled client and fill what its connection takes, before the test gives up. */
const STALL_DEADLINE_MS = 60_000;

const compile = schemaCompiler(loadSpec());

interface WholeList {
  /** The path as the contract writes it. */
  name: string;
  path: () => string;
  /** The list's schema in the contract. */
  schema: string;
  /** The ids the list must hold, newest first, read from the database. */
  expected: (db: Kysely<Tables>) => Promise<string[]>;
}

describe.each(backends)('whole lists on %s', (backend) => {
  let server: TestServer;
  let db: Kysely<Tables>;
  let dir: string;
  let member: string;
  let segment: string;

  const newestFirst = async (rows: Promise<{ id: string }[]>) => (await rows).map((row) => row.id);
  const lists: WholeList[] = [
    { name: '/contacts', path: () => '/contacts', schema: 'ContactList', expected: (db) => newestFirst(db.selectFrom('contacts').select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').execute()) },
    {
      name: '/segments/{segment_id}/contacts', path: () => `/segments/${segment}/contacts`,
      schema: 'ContactList',
      expected: (db) => newestFirst(db.selectFrom('segment_contacts').select('contact_id as id').where('segment_id', '=', segment).orderBy('contact_created_at', 'desc').orderBy('contact_id', 'desc').execute()),
    },
    { name: '/suppressions', path: () => '/suppressions', schema: 'SuppressionList', expected: (db) => newestFirst(db.selectFrom('suppressions').select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').execute()) },
    { name: '/broadcasts', path: () => '/broadcasts', schema: 'BroadcastList', expected: (db) => newestFirst(db.selectFrom('broadcasts').select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').execute()) },
    { name: '/templates', path: () => '/templates', schema: 'TemplateList', expected: (db) => newestFirst(db.selectFrom('templates').select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').execute()) },
    {
      name: '/api-keys', path: () => '/api-keys',
      schema: 'ApiKeyList',
      expected: (db) => newestFirst(db.selectFrom('api_keys').select('id').where('revoked_at', 'is', null).orderBy('created_at', 'desc').orderBy('id', 'desc').execute()),
    },
    { name: '/segments', path: () => '/segments', schema: 'SegmentList', expected: (db) => newestFirst(db.selectFrom('segments').select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').execute()) },
    { name: '/audiences', path: () => '/audiences', schema: 'AudienceList', expected: (db) => newestFirst(db.selectFrom('segments').select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').execute()) },
    {
      name: '/contacts/{contact_id}/segments', path: () => `/contacts/${member}/segments`,
      schema: 'ContactSegmentList',
      expected: (db) => newestFirst(db.selectFrom('segment_contacts').select('segment_id as id').where('contact_id', '=', member).orderBy('created_at', 'desc').orderBy('segment_id', 'desc').execute()),
    },
    { name: '/topics', path: () => '/topics', schema: 'TopicList', expected: (db) => newestFirst(db.selectFrom('topics').select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').execute()) },
    { name: '/contacts/{contact_id}/topics', path: () => `/contacts/${member}/topics`, schema: 'ContactTopicList', expected: (db) => newestFirst(db.selectFrom('topics').select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').execute()) },
    { name: '/webhooks', path: () => '/webhooks', schema: 'WebhookList', expected: (db) => newestFirst(db.selectFrom('webhooks').select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').execute()) },
    { name: '/domains', path: () => '/domains', schema: 'DomainList', expected: (db) => newestFirst(db.selectFrom('domains').select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').execute()) },
  ];

  beforeAll(async () => {
    server = await startTestServer(backend);
    db = server.store.database.db;
    dir = mkdtempSync(joinPath(tmpdir(), 'mailroom-whole-lists-'));
    const created = await server.api('POST', '/contacts', { email: 'member@example.com' });
    member = created.id;
    const [first] = await fillSegments(db, 1);
    segment = first!;
    // Each list once while it is short: the first request of a kind does work once (the validator
    // reads the contract, checks are compiled) that is not what is measured here.
    for (const list of lists) expect((await server.request(list.path())).status).toBe(200);
    const contacts = await fillContacts(db, CONTACTS);
    await join(db, contacts, [segment]);
    await join(db, [member], await fillSegments(db, OTHERS));
    await fillSuppressions(db, SUPPRESSIONS);
    await fillBroadcasts(db, OTHERS, segment);
    await fillTemplates(db, OTHERS);
    await fillApiKeys(db, OTHERS);
    await fillTopics(db, OTHERS);
    await fillWebhooks(db, OTHERS);
    await fillDomains(db, OTHERS);
    // PostgreSQL plans by the statistics autovacuum gathers a while after a table grows; gathered now,
    // each chunk of a walk is read off its index from the start.
    if (backend === 'postgres') await sql`analyze`.execute(db);
  });
  afterAll(async () => {
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.each(lists)(
    'answers $name whole and valid, newest first, with a turn of the event loop every 50 ms and memory bounded',
    async ({ path, schema, expected }) => {
      const file = joinPath(dir, 'list.json');
      const turns = turnGauge();
      const memory = memoryGauge();
      const answer = await fetchInChild(server.url + path(), TEST_KEY, file);
      const longestTurnMs = turns();
      const grown = memory();

      expect(answer).toEqual({ status: 200, contentType: 'application/json; charset=utf-8' });
      const body = JSON.parse(readFileSync(file, 'utf8'));
      const check = compile(`/components/schemas/${schema}`);
      expect(check(body), JSON.stringify(check.errors?.slice(0, 3))).toBe(true);
      expect(body.has_more).toBe(false);
      const want = await expected(db);
      expect(want.length).toBeGreaterThanOrEqual(Math.min(CONTACTS, OTHERS));
      const listed = body.data.map((item: { id: string }) => item.id);
      expect({ count: listed.length, firstOutOfPlace: listed.findIndex((id: string, at: number) => id !== want[at]) }).toEqual({ count: want.length, firstOutOfPlace: -1 });
      expect(longestTurnMs).toBeLessThan(LONGEST_TURN_MS);
      expect(grown).toBeLessThan(MEMORY_BOUND);
    },
  );

  it('reads no further than its client takes: a list stalled midway holds little, and ends with a row added at its end meanwhile', async () => {
    const memory = memoryGauge();
    const chunks: Buffer[] = [];
    const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
    const closed = new Promise<void>((resolve, reject) => socket.on('close', () => resolve()).on('error', reject));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.pause();
    socket.write(`GET /suppressions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_KEY}\r\nConnection: close\r\n\r\n`);
    await expect.poll(() => socket.readableLength, { timeout: STALL_DEADLINE_MS }).toBeGreaterThan(0);
    await untilIdle();
    const held = memory();
    // Older than every other, so last in the list: only a server that has not read that far yet lists it.
    const oldest = { id: randomUUID(), email: 'oldest@example.com', email_key: 'oldest@example.com', origin: 'manual' as const, source_id: null, created_at: '2025-01-01T00:00:00.000Z' };
    await db.insertInto('suppressions').values(oldest).execute();
    socket.resume();
    await closed;

    expect(held).toBeLessThan(MEMORY_BOUND);
    const { head, body } = answerOf(Buffer.concat(chunks));
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    const list = JSON.parse(body);
    const check = compile('/components/schemas/SuppressionList');
    expect(check(list), JSON.stringify(check.errors?.slice(0, 3))).toBe(true);
    expect(list.data).toHaveLength(SUPPRESSIONS + 1);
    expect(list.data.at(-1).id).toBe(oldest.id);
  });

  /** Resolves once this process has been nearly idle for half a second: the server waits on its client. */
  async function untilIdle(): Promise<void> {
    const deadline = performance.now() + STALL_DEADLINE_MS;
    let quiet = 0;
    let last = performance.eventLoopUtilization();
    while (quiet < 5) {
      if (performance.now() > deadline) throw new Error(`the server was still busy after ${STALL_DEADLINE_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const now = performance.eventLoopUtilization();
      quiet = performance.eventLoopUtilization(now, last).utilization < 0.1 ? quiet + 1 : 0;
      last = now;
    }
  }
});

/** The head and body of an HTTP/1.1 answer whose connection then closed: chunked (RFC 9112, section 7.1, without extensions or trailers) or not. */
function answerOf(raw: Buffer): { head: string; body: string } {
  const headEnd = raw.indexOf('\r\n\r\n');
  const head = raw.subarray(0, headEnd).toString();
  const rest = raw.subarray(headEnd + 4);
  if (!/\r\ntransfer-encoding: chunked/i.test(head)) return { head, body: rest.toString() };
  const parts: Buffer[] = [];
  for (let at = 0; ; ) {
    const lineEnd = rest.indexOf('\r\n', at);
    const size = parseInt(rest.subarray(at, lineEnd).toString(), 16);
    if (size === 0) return { head, body: Buffer.concat(parts).toString() };
    parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}
