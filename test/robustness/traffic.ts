// Generated traffic for every operation of the contract: a Plan says, symbolically, what to send (ids
// are "the n-th thing created so far" until the moment of sending, so that generation stays
// deterministic while the run creates things), and a World turns plans into raw requests and keeps
// what the server accepted, to read it all back at the end.
import fc from 'fast-check';
import { TEST_KEY } from '../support/server.ts';
import { deepNesting, stringAttacks, swapCase, type SchemaArbitraries } from './arbitraries.ts';
import type { Operation } from './contract.ts';
import type { RawRequest } from './http.ts';

/** A path or query value: something that exists (resolved when sent), or a literal. */
type Choice = { existing: number; alias: boolean } | { value: unknown };

export interface Plan {
  operationId: string;
  path: Record<string, Choice>;
  query: [string, Choice][];
  headers: [string, string][];
  auth: string | undefined;
  body?: { json: unknown } | { raw: string };
  contentType?: string;
  /** Send again, byte for byte, the n-th earlier request that carried an Idempotency-Key. */
  replay?: number;
}

/** Paths that still name a resource by its legacy name. */
const LEGACY: Record<string, string> = { audiences: 'segments' };
const current = (resource: string) => LEGACY[resource] ?? resource;
/** The resource an operation is about: the first segment of its path, by its current name. */
export const resourceOf = (op: Operation) => current(op.path.split('/')[1]!);
/** The resource a path parameter names one of: `contact_id` a contact, `audience_id` a segment. */
const poolOf = (parameter: string) => current(`${parameter.replace(/_id$/, '')}s`);
/**
 * What a 2xx answer is about: the resource its `object` names, or the operation's own when it names
 * none; nothing (undefined) for a list or a relation between two things (`contact_segment`).
 */
const OBJECTS: Record<string, string> = { contact: 'contacts', segment: 'segments', audience: 'segments', topic: 'topics', template: 'templates', broadcast: 'broadcasts', email: 'emails', suppression: 'suppressions', webhook: 'webhooks' };
const subjectOf = (op: Operation, body: any) => (typeof body?.object === 'string' ? OBJECTS[body.object] : resourceOf(op));
const pathParams = (op: Operation) => op.parameters.filter((p) => p.in === 'path');

const RAW_BODIES = [
  '', '{', '{"a":', 'null', '"text"', '[]', '{}', 'NaN', '\uFEFF{}', '{"email":"a@example.com","email":"b@example.com"}',
  '[' .repeat(100_000) + ']'.repeat(100_000), '{"a":'.repeat(50_000) + '1' + '}'.repeat(50_000), '\u0000', '{"x":"\\ud800"}',
];

export function planArbitrary(ops: Operation[], arbs: SchemaArbitraries): fc.Arbitrary<Plan> {
  return fc.oneof(...ops.map((op) => planFor(op, arbs)));
}

function choice(schema: object, arbs: SchemaArbitraries, existing: boolean): fc.Arbitrary<Choice> {
  return fc.oneof(
    ...(existing ? [{ weight: 6, arbitrary: fc.record({ existing: fc.nat(), alias: fc.boolean() }) }] : []),
    { weight: 2, arbitrary: arbs.valid(schema).map((value) => ({ value })) },
    { weight: 2, arbitrary: arbs.attack(schema).map((value) => ({ value })) },
  );
}

export function planFor(op: Operation, arbs: SchemaArbitraries): fc.Arbitrary<Plan> {
  const path = fc.record(Object.fromEntries(pathParams(op).map((p) => [p.name, choice(p.schema, arbs, true)])));
  const query = fc.tuple(
    ...op.parameters.filter((p) => p.in === 'query').map((p) => fc.option(choice(p.schema, arbs, p.schema.$ref !== undefined || p.schema.format === 'uuid').map((c) => [p.name, c] as [string, Choice]), { freq: 2 })),
    rarely(fc.constantFrom<[string, Choice]>(['unknown', { value: '1' }], ['limit', { value: ['1', '2'] }], ['__proto__', { value: 'x' }]), null),
  ).map((entries) => entries.filter((e): e is [string, Choice] => e !== null));
  const headers = fc.tuple(
    ...op.parameters.filter((p) => p.in === 'header').map((p) =>
      fc.option(
        fc.tuple(fc.oneof({ weight: 5, arbitrary: arbs.valid(p.schema) }, { weight: 1, arbitrary: arbs.attack(p.schema) }), fc.nat(9)).map(([value, n]) => {
          const text = headerText(value);
          // Now and then the same header twice, in another case.
          return n === 0 ? [[p.name, text], [swapCase(p.name), text + 'x']] : [[n % 2 ? p.name.toLowerCase() : p.name, text]];
        }),
        { freq: 2 },
      ),
    ),
  ).map((sets) => sets.filter((s) => s !== null).flat() as [string, string][]);
  const auth = fc.oneof(
    { weight: 40, arbitrary: fc.constant(`Bearer ${TEST_KEY}`) },
    { weight: 1, arbitrary: fc.constantFrom(undefined, 'Bearer', `bearer ${TEST_KEY}`, `Basic ${TEST_KEY}`, 'Bearer re_unknown000000000000000000000000', `Bearer ${TEST_KEY} extra`) },
  );
  const json = op.body ? fc.oneof({ weight: 2, arbitrary: arbs.valid(op.body) }, { weight: 3, arbitrary: arbs.hostile(op.body) }) : fc.jsonValue({ maxDepth: 2 });
  const body = fc.oneof(
    { weight: op.body ? 30 : 1, arbitrary: json.map((value) => ({ json: value })) },
    { weight: 2, arbitrary: fc.oneof(fc.constantFrom(...RAW_BODIES), stringAttacks, deepNesting.map((v) => JSON.stringify(v))).map((raw) => ({ raw })) },
    { weight: op.body ? 0 : 20, arbitrary: fc.constant(undefined) },
  );
  const contentType = fc.oneof(
    { weight: 30, arbitrary: fc.constant('application/json') },
    { weight: 1, arbitrary: fc.constantFrom(undefined, 'text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=utf-16', 'application/json; charset=latin1', 'APPLICATION/JSON', 'application/merge-patch+json') },
  );
  const idempotent = op.parameters.some((p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key');
  const replay = idempotent ? rarely(fc.nat(), undefined) : fc.constant(undefined);
  return fc.record({ operationId: fc.constant(op.operationId), path, query, headers, auth, body, contentType, replay });
}

/** One time in eight the value, else `none`. */
const rarely = <T, N>(arb: fc.Arbitrary<T>, none: N): fc.Arbitrary<T | N> => fc.oneof({ weight: 7, arbitrary: fc.constant(none) }, { weight: 1, arbitrary: arb });

/** What HTTP can carry in a header value: no CR, LF or NUL, Latin-1 only. */
function headerText(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value) ?? '';
  return text.replace(/[^\t\x20-\x7e\x80-\xff]/g, '?').slice(0, 4_000);
}

/**
 * Percent-encodes any string, lone surrogates included (they go as U+FFFD, as Buffer writes them). Cut
 * to 600 characters: past 16 KB of request line and headers, Node answers 431 before any code of ours.
 */
export function encode(value: unknown): string {
  const text = (typeof value === 'string' ? value : JSON.stringify(value) ?? '').slice(0, 600);
  return [...Buffer.from(text, 'utf8')].map((b) => (/[A-Za-z0-9\-._~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('');
}

export interface Sent {
  op: Operation;
  request: RawRequest;
  /** The JSON body sent, when it was JSON. */
  json?: unknown;
}

/** What the run created, by resource and id, with what was asked for it (merge patches applied). */
export class World {
  readonly pools = new Map<string, { id: string; alias?: string }[]>();
  readonly expected = new Map<string, Map<string, unknown>>();
  readonly idempotent: { sent: Sent; status: number; text: string }[] = [];

  constructor(private readonly ops: Operation[]) {}

  resolve(plan: Plan): Sent {
    const op = this.ops.find((o) => o.operationId === plan.operationId)!;
    if (plan.replay !== undefined) {
      const earlier = this.idempotent.filter((r) => r.sent.op === op);
      if (earlier.length) return earlier[plan.replay % earlier.length]!.sent;
    }
    const value = (c: Choice, pool = this.pools.get(resourceOf(op)) ?? []) => {
      if ('value' in c) return c.value;
      const entry = pool[c.existing % Math.max(pool.length, 1)];
      if (!entry) return '00000000-0000-4000-8000-000000000000';
      // A contact by its email, a template by its alias; in another case now and then.
      return c.alias && entry.alias ? (c.existing % 3 === 0 ? swapCase(entry.alias) : entry.alias) : entry.id;
    };
    const path = op.path.replace(/\{(\w+)\}/g, (_, name) => encode(value(plan.path[name]!, this.pools.get(poolOf(name)) ?? [])));
    const query = plan.query.map(([name, c]) => {
      const v = value(c);
      return (Array.isArray(v) ? v : [v]).map((item) => `${encode(name)}=${encode(item)}`).join('&');
    });
    const headers: [string, string][] = [...plan.headers];
    if (plan.auth !== undefined) headers.push(['Authorization', plan.auth]);
    let body: string | undefined;
    if (plan.body && 'json' in plan.body) body = JSON.stringify(plan.body.json);
    else if (plan.body) body = plan.body.raw;
    if (body !== undefined && plan.contentType) headers.push(['Content-Type', plan.contentType]);
    const request = { method: op.method, path: path + (query.length ? `?${query.join('&')}` : ''), headers, body };
    return { op: this.answering(op, path), request, json: plan.body && 'json' in plan.body ? plan.body.json : undefined };
  }

  /** `/topics/` (an id left empty) is the URL of the collection: the operation there is the one that answers. */
  private answering(op: Operation, path: string): Operation {
    if (!path.endsWith('/') || !/\/\{\w+\}$/.test(op.path)) return op;
    const collection = op.path.replace(/\/\{\w+\}$/, '');
    return this.ops.find((o) => o.method === op.method && o.path === collection) ?? op;
  }

  /** Learns from a 2xx answer: what was created, changed or deleted. */
  record(sent: Sent, status: number, body: any): void {
    if (status >= 300) return;
    const { op, json } = sent;
    const resource = subjectOf(op, body);
    if (!resource) return;
    const expected = this.expected.get(resource) ?? new Map<string, unknown>();
    this.expected.set(resource, expected);
    const pool = this.pools.get(resource) ?? [];
    this.pools.set(resource, pool);
    // Where a create declares 201, a 200 means "it existed already, unchanged": nothing new to expect. A
    // POST under another resource's path creates only when it says so with 201 (a contact in an audience).
    const creates = op.method === 'POST' && (status === 201 || (pathParams(op).length === 0 && !('201' in op.responses)));
    const removed = Array.isArray(body?.data) && body.data.length > 0 && body.data.every((d: { deleted?: unknown }) => d.deleted === true);
    // A POST under one thing's path that answers the id of another (a duplicate) made that other, whose
    // content is the first one's: known to exist, with nothing asked of it to compare.
    const copied = op.method === 'POST' && status === 200 && pathParams(op).length > 0 && typeof body?.id === 'string' && !sent.request.path.includes(body.id) && !expected.has(body.id);
    if (copied) {
      pool.push({ id: body.id });
      expected.set(body.id, {});
    } else if (removed) {
      // Removed in bulk (suppressions): each entry names one thing that is gone.
      for (const { id } of body.data as { id: string }[]) {
        expected.delete(id);
        const at = pool.findIndex((e) => e.id === id);
        if (at >= 0) pool.splice(at, 1);
      }
    } else if (creates && Array.isArray(body?.data) && Array.isArray((json as { emails?: unknown })?.emails)) {
      // Added in bulk (suppressions): one id per address, an address added before keeping its first id and spelling.
      const emails = (json as { emails: string[] }).emails;
      body.data.forEach((d: { id: string }, i: number) => {
        if (expected.has(d.id)) return;
        pool.push({ id: d.id, alias: emails[i] });
        expected.set(d.id, { email: emails[i] });
      });
    } else if (creates) {
      // One thing created (body.id), or a batch (body.data) whose left-out items are in body.errors.
      const created: [string, unknown][] = [];
      if (Array.isArray(body?.data) && Array.isArray(json)) {
        const left = new Set((body.errors ?? []).map((e: { index: number }) => e.index));
        const kept = json.filter((_, i) => !left.has(i));
        body.data.forEach((d: { id: string }, i: number) => created.push([d.id, kept[i]]));
      } else if (body?.id) created.push([body.id, json]);
      for (const [id, value] of created) {
        if (!expected.has(id)) pool.push({ id, alias: aliasOf(value) });
        expected.set(id, structuredClone(value));
      }
    } else if (op.method === 'PATCH' && expected.has(body?.id)) {
      expected.set(body.id, mergePatch(expected.get(body.id), json));
    } else if (op.method === 'DELETE') {
      const id = body?.contact ?? body?.id;
      expected.delete(id);
      const at = pool.findIndex((e) => e.id === id);
      if (at >= 0) pool.splice(at, 1);
    }
  }
}

/** What else names a created thing in a path: a contact's email, a template's alias. */
function aliasOf(value: unknown): string | undefined {
  const v = value as { email?: unknown; alias?: unknown } | undefined;
  return typeof v?.alias === 'string' ? v.alias : typeof v?.email === 'string' ? v.email : undefined;
}

/** RFC 7386: objects merge key by key, null removes a key, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!patch || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as object) } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

/**
 * Whether what the API returns keeps what was asked: every field of `asked` that the response schema
 * declares is there with the same value, a single address may come back as a one-item list, an empty
 * text or an empty list of addresses as null. Nested objects (properties, variables) must match key for
 * key. Returns what differs.
 */
export function lost(asked: unknown, got: unknown, declared: Set<string>, depth = 0, at = ''): string[] {
  if (asked === got) return [];
  if ((asked === '' || (Array.isArray(asked) && asked.length === 0)) && got === null) return [];
  if (typeof asked === 'string' && Array.isArray(got) && got.length === 1) return lost(asked, got[0], declared, depth, at);
  if (Array.isArray(asked) && Array.isArray(got)) {
    if (asked.length !== got.length) return [`${at}: ${asked.length} items asked, ${got.length} returned`];
    return asked.flatMap((item, i) => lost(item, got[i], declared, depth + 1, `${at}[${i}]`));
  }
  if (asked && got && typeof asked === 'object' && typeof got === 'object') {
    const keys = Object.keys(asked).filter((k) => depth > 0 || declared.has(k));
    const problems = keys.flatMap((k) => (k in got ? lost((asked as any)[k], (got as any)[k], declared, depth + 1, at ? `${at}.${k}` : k) : [`${at ? `${at}.` : ''}${k}: missing`]));
    // A nested object must come back as given: no key the caller did not set, or removed (nulls aside).
    const extra = depth > 0 && !Array.isArray(got) && Object.keys(got).some((k) => !(k in asked) && (got as any)[k] !== null);
    return extra ? [...problems, `${at}: keys ${JSON.stringify(Object.keys(got))}, asked ${JSON.stringify(Object.keys(asked))}`] : problems;
  }
  return [`${at}: asked ${JSON.stringify(asked)?.slice(0, 60)}, returned ${JSON.stringify(got)?.slice(0, 60)}`];
}

