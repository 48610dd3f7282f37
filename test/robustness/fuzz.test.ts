// Every operation of openapi.yaml, driven with requests generated from its own schemas (valid ones and
// hostile ones), against a live server on each database. Every answer must be one the contract
// declares, never a 5xx, JSON that matches the response schema; an Idempotency-Key sent again with the
// same body must replay the first answer; and at the end everything the server accepted is read back,
// unchanged, one by one and through the contact list, paged and whole. The run is deterministic:
// FC_SEED picks another one, FC_RUNS makes it longer.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSpec, resolveRef } from '../../server/contract.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, TEST_KEY, type TestServer } from '../support/server.ts';
import { schemaArbitraries } from './arbitraries.ts';
import { mailboxesIn, notOneMailbox, operations, responseChecker, responseSchema, type Operation } from './contract.ts';
import { knownAttacks } from './corpus.ts';
import { send } from './http.ts';
import { lost, planArbitrary, planFor, World, type Sent } from './traffic.ts';

const SEED = Number(process.env.FC_SEED ?? 20261121);
const RUNS = Number(process.env.FC_RUNS ?? 500);
// The generated run sends its requests one at a time; a busy machine stretches it many times over.
const RUN_DEADLINE_MS = 600_000 * Math.max(1, RUNS / 500);
const spec = loadSpec();
const ops = operations(spec);
const check = responseChecker(spec);
const arbs = schemaArbitraries(spec);

/** Statuses seen and contract violations, with enough of each request to reproduce it. */
class Tally {
  readonly statuses: Record<string, number> = {};
  readonly violations: string[] = [];
  requests = 0;

  constructor(private readonly backend: string) {}

  async exchange(base: string, sent: Sent): Promise<{ status: number; body: any } | undefined> {
    this.requests++;
    const answer = await send(base, sent.request);
    const what = `${sent.op.operationId} ${sent.request.method} ${sent.request.path.slice(0, 100)}${sent.request.body ? ` body ${JSON.stringify(sent.request.body.toString().slice(0, 160))}` : ''}`;
    if ('error' in answer) {
      this.statuses['no answer'] = (this.statuses['no answer'] ?? 0) + 1;
      this.violations.push(`${what} -> no answer: ${answer.error}`);
      return undefined;
    }
    this.statuses[answer.status] = (this.statuses[answer.status] ?? 0) + 1;
    // An empty path parameter leaves `/broadcasts/`, which the router takes (as it takes `/broadcasts`)
    // for the operation on the collection: the answer is that operation's.
    const path = sent.request.path.split('?')[0]!;
    const op = ops.find((o) => o.method === sent.op.method && `${o.path}/` === path) ?? sent.op;
    const { problems, body } = check(op, answer);
    if (answer.status < 300 && body !== undefined) {
      for (const { at, mailbox } of mailboxesIn(spec, responseSchema(spec, op, answer.status), body)) {
        const wrong = notOneMailbox(mailbox);
        if (wrong) problems.push(`returns ${at} = ${JSON.stringify(mailbox)}, which ${wrong}`);
      }
    }
    if (problems.length) this.violations.push(`${what} -> ${answer.status} ${answer.text.slice(0, 160)}: ${problems.join('; ')}`);
    return { status: answer.status, body };
  }

  summary(): string {
    const fivexx = Object.entries(this.statuses).filter(([s]) => Number(s) >= 500).reduce((n, [, c]) => n + c, 0);
    return `robustness fuzz ${this.backend}: seed ${SEED}, ${this.requests} requests, statuses ${JSON.stringify(this.statuses)}, 5xx: ${fivexx}, violations: ${this.violations.length}`;
  }
}

const readOp = (resource: string) => ops.find((o) => o.method === 'GET' && new RegExp(`^/${resource}/\\{\\w+\\}$`).test(o.path));
/** The list of a resource: `GET /things` answering `{data: [...]}`. */
const listOp = (resource: string) => ops.find((o) => o.method === 'GET' && o.path === `/${resource}` && 'data' in properties(responseSchema(spec, o, 200)));
const get = (op: Operation, path: string): Sent => ({ op, request: { method: 'GET', path, headers: [['Authorization', `Bearer ${TEST_KEY}`]] } });

describe.each(backends)('robustness fuzz on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend, { config: { rateLimitPerSecond: 0 } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('answers every generated request within the contract, replays idempotent ones, and loses nothing it accepted', { timeout: RUN_DEADLINE_MS }, async () => {
    const tally = new Tally(backend);
    const world = new World(ops);
    // Known attacks, then two plans per operation (so that every one is driven however short the run),
    // then the generated traffic.
    const each = ops.flatMap((op) => fc.sample(planFor(op, arbs), { seed: SEED, numRuns: 2 }));
    const plans = [...knownAttacks(), ...each, ...fc.sample(planArbitrary(ops, arbs), { seed: SEED, numRuns: RUNS })];
    const covered = new Set(plans.map((p) => p.operationId));
    expect(ops.filter((o) => !covered.has(o.operationId)).map((o) => o.operationId)).toEqual([]);

    for (const plan of plans) {
      const sent = world.resolve(plan);
      const earlier = world.idempotent.find((r) => r.sent === sent);
      const answer = await tally.exchange(server.url, sent);
      if (!answer) continue;
      world.record(sent, answer.status, answer.body);
      const keyed = sent.request.headers.some(([name]) => name.toLowerCase() === 'idempotency-key');
      if (earlier && earlier.status === 200) {
        // The same key, body and mode again: the first answer, exactly.
        if (answer.status !== 200 || JSON.stringify(answer.body) !== earlier.text) {
          tally.violations.push(`${sent.op.operationId} replay of an Idempotency-Key -> ${answer.status} ${JSON.stringify(answer.body).slice(0, 120)}, first answer 200 ${earlier.text.slice(0, 120)}`);
        }
      } else if (!earlier && keyed) world.idempotent.push({ sent, status: answer.status, text: JSON.stringify(answer.body) });
    }

    // Nothing accepted is lost: each thing created reads back as it was asked for.
    let readBack = 0;
    for (const [resource, expected] of world.expected) {
      const op = readOp(resource);
      if (!op) continue;
      const declared = new Set(Object.keys(properties(responseSchema(spec, op, 200))));
      for (const [id, asked] of expected) {
        readBack++;
        const answer = await tally.exchange(server.url, get(op, op.path.replace(/\{\w+\}/, id)));
        if (answer?.status !== 200) {
          tally.violations.push(`read back ${resource}/${id} -> ${answer?.status ?? 'no answer'}`);
          continue;
        }
        const differences = lost(asked, answer.body, declared);
        if (differences.length) tally.violations.push(`read back ${resource}/${id}: ${differences.join('; ')} (asked ${JSON.stringify(asked).slice(0, 200)})`);
      }
      const list = listOp(resource);
      if (list) {
        const whole = await tally.exchange(server.url, get(list, list.path));
        const ids = (whole?.body?.data ?? []).map((c: { id: string }) => c.id).sort();
        if (JSON.stringify(ids) !== JSON.stringify([...expected.keys()].sort())) {
          tally.violations.push(`${list.path} (whole) lists ${ids.length} of ${expected.size} ${resource}, or others`);
        }
        const paged: string[] = [];
        for (let after: string | undefined, pages = 0; pages < 1_000; pages++) {
          const page = await tally.exchange(server.url, get(list, `${list.path}?limit=100${after ? `&after=${after}` : ''}`));
          paged.push(...(page?.body?.data ?? []).map((c: { id: string }) => c.id));
          after = paged.at(-1);
          if (!page?.body?.has_more) break;
        }
        if (JSON.stringify(paged.sort()) !== JSON.stringify([...expected.keys()].sort())) {
          tally.violations.push(`${list.path} (paged) lists ${paged.length} of ${expected.size} ${resource}, or others`);
        }
      }
    }

    const created = [...world.expected].map(([r, m]) => `${m.size} ${r}`).join(', ');
    console.log(`${tally.summary()}; ${readBack} read back (${created}); ${world.idempotent.length} idempotent requests`);
    if (tally.violations.length) console.log(`robustness fuzz ${backend} violations:\n  ${[...new Set(tally.violations)].slice(0, 40).join('\n  ')}`);
    expect(tally.violations).toEqual([]);
  });

  it('keeps every one of 40 concurrent changes to one contact', async () => {
    const created = await server.request('/contacts', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: `concurrent-${backend}@example.com` }) });
    const { id } = await created.json();
    const patches = Array.from({ length: 40 }, (_, i) =>
      server.request(`/contacts/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ properties: { [`key_${i}`]: `value ${i}` } }) }),
    );
    const statuses = (await Promise.all(patches)).map((r) => r.status);
    const contact = await (await server.request(`/contacts/${id}`)).json();
    const kept = Object.keys(contact.properties ?? {}).length;
    console.log(`robustness concurrent patches ${backend}: statuses ${JSON.stringify(count(statuses))}, ${kept} of 40 properties kept`);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(kept).toBe(40);
  });
});

function properties(schema: unknown): Record<string, unknown> {
  return resolveRef(spec, schema)?.properties ?? {};
}

const count = (values: number[]) => values.reduce<Record<number, number>>((acc, v) => ((acc[v] = (acc[v] ?? 0) + 1), acc), {});
