// Cost as the data grows: the p50 of the contact list's first page, a page deep in it, a contact by id
// (sequential requests to the full server), and a delivery worker's claim of a batch from the outbox,
// at each size, from an empty database. Keyset pagination and indexed lookups should cost the same at
// a million rows as at ten thousand; the query plans printed at the largest size say why they do, or
// why not. Run by `npm run bench` (the `scale` section).
import { CompiledQuery, sql, type Kysely } from 'kysely';
import { LISTED } from '../../server/store/contacts.ts';
import type { Tables } from '../../server/store/database.ts';
import type { EmailRecord } from '../../server/store/emails.ts';
import type { Store } from '../../server/store/index.ts';
import { timeOrderedId } from '../../server/store/timeOrderedId.ts';

export interface GrowthBench {
  /** A running Mailroom server on the same, empty, database as `store`. */
  url: string;
  apiKey: string;
  store: Store;
  label: string;
  /** Contacts at each step, ascending; the outbox holds as many emails at the first and the last. */
  sizes: number[];
}

const REQUESTS = 200;
const CLAIMS = 50;
const CHUNK = 2000;
const BASE = Date.parse('2026-01-01T00:00:00.000Z');
const TARGET = 2;

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!;

async function timed(times: number, warmUps: number, run: (n: number) => Promise<unknown>): Promise<number> {
  const took: number[] = [];
  for (let n = 0; n < warmUps + times; n++) {
    const started = performance.now();
    await run(n);
    if (n >= warmUps) took.push(performance.now() - started);
  }
  return percentile(took, 0.5);
}

async function growContacts(db: Kysely<Tables>, from: number, to: number, sample: string[]): Promise<void> {
  for (let start = from; start < to; start += CHUNK) {
    const rows = Array.from({ length: Math.min(CHUNK, to - start) }, (_, j) => {
      const n = start + j;
      const at = new Date(BASE + n * 7).toISOString();
      const id = timeOrderedId(BASE + n * 7);
      if (n % 997 === 0) sample.push(id);
      return { id, email: `g${n}@bench.dev`, email_key: `g${n}@bench.dev`, first_name: `First${n}`, last_name: null, unsubscribed: 0, properties: '{"plan":"pro"}', created_at: at, updated_at: at };
    });
    await db.insertInto('contacts').values(rows).execute();
  }
}

async function growOutbox(db: Kysely<Tables>, from: number, to: number): Promise<void> {
  const due = new Date(BASE).toISOString();
  for (let start = from; start < to; start += CHUNK / 2) {
    const rows: EmailRecord[] = Array.from({ length: Math.min(CHUNK / 2, to - start) }, (_, j) => ({
      id: timeOrderedId(), from_address: 'Acme <news@acme.dev>', to_addresses: `["o${start + j}@example.com"]`, cc: null, bcc: null, reply_to: null,
      subject: 'News', html: '<p>Hello</p>', text: null, headers: null, tags: null, last_event: 'queued', attempts: 0, scheduled_at: null, next_attempt_at: due,
      message_id: null, last_error: null, created_at: due, updated_at: due, broadcast_id: null, contact_id: null,
    }));
    await db.insertInto('emails').values(rows).execute();
  }
}

/** The plan of a compiled query, a line per step. */
async function planOf(store: Store, query: CompiledQuery): Promise<string[]> {
  const sqlite = store.database.dialect === 'sqlite';
  const explained = CompiledQuery.raw(`${sqlite ? 'explain query plan' : 'explain'} ${query.sql}`, [...query.parameters]);
  const { rows } = await store.database.db.executeQuery<Record<string, unknown>>(explained);
  return rows.map((row) => String(sqlite ? row.detail : row['QUERY PLAN']));
}

export async function benchGrowth({ url, apiKey, store, label, sizes }: GrowthBench): Promise<void> {
  const db = store.database.db;
  const get = async (path: string) => {
    const res = await fetch(url + path, { headers: { authorization: `Bearer ${apiKey}` } });
    if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}`);
    await res.arrayBuffer();
  };
  const sample: string[] = [];
  const figures: Record<string, number[]> = { 'first page': [], 'deep page': [], 'contact by id': [], 'claim a batch': [] };
  const outboxSizes: number[] = [];
  let contacts = 0;
  let outbox = 0;
  let deepId = '';
  for (const [step, size] of sizes.entries()) {
    await growContacts(db, contacts, size, sample);
    contacts = size;
    // SQLite's inserts never gave the event loop a turn: let it hear of keep-alive connections the
    // server closed meanwhile, or the next request would go out on one of them.
    await new Promise((resolve) => setTimeout(resolve, 100));
    // 90% of the way down the list, newest first: the contact made 10% of the way in.
    deepId = (await db.selectFrom('contacts').select('id').orderBy('created_at', 'asc').orderBy('id', 'asc').offset(Math.floor(size / 10)).limit(1).executeTakeFirstOrThrow()).id;
    figures['first page']!.push(await timed(REQUESTS, 20, () => get('/contacts?limit=100')));
    figures['deep page']!.push(await timed(REQUESTS, 20, () => get(`/contacts?limit=100&after=${deepId}`)));
    figures['contact by id']!.push(await timed(REQUESTS, 20, (n) => get(`/contacts/${sample[(n * 7919) % sample.length]}`)));
    if (step === 0 || step === sizes.length - 1) {
      await growOutbox(db, outbox, size);
      outbox = size;
      outboxSizes.push(size);
      figures['claim a batch']!.push(await timed(CLAIMS, 5, () => store.emails.claimNextBatch(100, new Date(), 60_000)));
    }
  }

  const n = (value: number) => value.toLocaleString('en');
  console.log(`Cost as data grows on ${label} (p50 of ${REQUESTS} sequential requests, ${CLAIMS} claims of 100; contacts ${sizes.map(n).join(' / ')}; outbox ${outboxSizes.map(n).join(' / ')}):`);
  for (const [name, values] of Object.entries(figures)) {
    const ratio = values.at(-1)! / values[0]!;
    const verdict = ratio <= TARGET ? 'meets' : 'SHORT of';
    console.log(`  ${name.padEnd(15)} ${values.map((ms) => `${ms.toFixed(2)} ms`).join(' / ').padEnd(34)} ${ratio.toFixed(2)}× (target within ${TARGET}×: ${verdict} it)`);
  }

  // The store's own queries, as it builds them, explained at the largest size.
  const listed = db.selectFrom('contacts').select(LISTED).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(101);
  const deep = await db.selectFrom('contacts').select(['created_at', 'id']).where('id', '=', deepId).executeTakeFirstOrThrow();
  const plans = {
    'first page': listed.compile(),
    'deep page': listed.where((eb) => eb(eb.refTuple('created_at', 'id'), '<', eb.tuple(deep.created_at, deep.id))).compile(),
    'contact by id': db.selectFrom('contacts').select(LISTED).where('id', '=', sample[0]!).compile(),
    'claim a batch': sql`select id from emails where id in ${store.emails.dueEmails(100, new Date())}`.compile(db),
  };
  console.log('  query plans at the largest size:');
  for (const [name, query] of Object.entries(plans)) console.log(`    ${name}: ${(await planOf(store, query)).join('; ')}`);
}
