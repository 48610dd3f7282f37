// End-to-end delivery against the transport's own limit, and with webhooks off and on. The limit:
// nodemailer's pooled SMTP alone (the bench target `nodemailer`) sending messages built before its clock
// starts, over as many connections as Mailroom opens, to the same sink. Mailroom: emails accepted through the API, then a delivery
// worker process (the bench target `deliver`, the delivery thread of `npm start` as a process) hands
// them to an SMTP sink process over pooled connections, while the server (the target `mailroom`)
// posts the webhooks, as `npm start`'s main thread does. A run is measured from
// the worker's start to the last email's outcome recorded. Each size runs without a webhook and with
// one enabled webhook subscribed to every email event type, posting to a receiver on 127.0.0.1 that
// answers 200 at once; the two alternate, and the medians are compared. Run by `npm run bench`.
import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import type { EventType } from '../../server/store/database.ts';
import type { Store } from '../../server/store/index.ts';
import { startCountingReceiver, type CountingReceiver } from '../support/receiver.ts';

type Target = { child: ChildProcess; url: string; first: any; ask: (message: string) => Promise<any> };

export interface DeliveryBench {
  /** The Mailroom server accepting the emails; it must allow webhooks on private addresses. */
  api: { url: string; key: string; pid: number };
  /** The store the server and the worker use, read to tell when outcomes are recorded. */
  store: Store;
  startTarget: (kind: 'sink' | 'deliver' | 'nodemailer', env?: Record<string, string>) => Promise<Target>;
  rounds: number;
  /** Delivery threads, each a process here. */
  threads: number;
  /** Which message sizes to run, `small` and `large`; both when unset. */
  sizes?: string[];
}

// Every email event type: a Record so that the compiler names any type added later and missing here.
const EMAIL_EVENTS: Record<Extract<EventType, `email.${string}`>, true> = {
  'email.scheduled': true, 'email.sent': true, 'email.delivered': true, 'email.delivery_delayed': true, 'email.bounced': true,
  'email.complained': true, 'email.failed': true, 'email.suppressed': true, 'email.canceled': true,
};
const RATIO_TARGET = 0.9;
/** Mailroom from the first message to the last outcome recorded, against nodemailer alone. */
const TRANSPORT_TARGET = { small: 0.8, large: 0.5 };
const DEADLINE_MS = 180_000;

/** CPU time a process has used, user and system, in ms (from /proc; 0 once it is gone). */
export function cpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}
/** Linux's USER_HZ, the unit of /proc/<pid>/stat's times. */
const CLOCK_TICKS = 100;

/** CPU time of every PostgreSQL process on this machine, in ms: the bench's database is on 127.0.0.1. */
function databaseCpuMs(): number {
  let ms = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') ms += cpuMs(Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return ms;
}

/** Where a run's CPU went, in ms: the delivery workers, the server (the webhook outbox), the SMTP sink, PostgreSQL, and this process (its receiver and polling). */
export type Cpu = Record<'worker' | 'server' | 'sink' | 'postgres' | 'bench', number>;

export interface Run {
  cpu: Cpu;
  seconds: number;
  /** From the first message at the sink to the last outcome recorded: the worker's start left out. */
  steady: number;
  /** With the webhook: its deliveries, and when the last landed at the receiver, in seconds from the worker's start. */
  hooks?: { owed: number; lastSeconds: number };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(what: string, done: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`delivery bench: still waiting for ${what} after ${DEADLINE_MS / 1000}s`);
    await pause(25);
  }
}

/** An operation of the bench's server, with its key; any answer but a 2xx is an error. */
export async function call(bench: DeliveryBench, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(bench.api.url + path, {
    method,
    headers: { authorization: `Bearer ${bench.api.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status >= 300) throw new Error(`${method} ${path} answered ${res.status}: ${await res.text()}`);
  return res.json();
}

async function accept(bench: DeliveryBench, total: number, html: string, from: string): Promise<void> {
  for (let sent = 0; sent < total; sent += 100) {
    const items = Array.from({ length: 100 }, (_, n) => ({ from, to: `r${sent + n}@example.com`, subject: 'News', html }));
    await call(bench, 'POST', '/emails/batch', items);
  }
}

const count = async (query: Promise<{ n: number | string | bigint }>) => Number((await query).n);

/** Emails still without an outcome: queued, claimed or not. */
const unrecorded = (store: Store) =>
  count(store.database.db.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n')).where('last_event', '=', 'queued').executeTakeFirstOrThrow());

const deliveriesOf = (store: Store, webhookId: string, state?: 'delivered') => {
  let query = store.database.db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<number>().as('n')).where('webhook_id', '=', webhookId);
  if (state) query = query.where('state', '=', state);
  return count(query.executeTakeFirstOrThrow());
};

/** Accepts `total` emails from `from` through the API, then delivers them with fresh workers to `sink`, timed. */
export async function deliverOnce(bench: DeliveryBench, sink: Target, total: number, html: string, withWebhook: boolean, from = 'Acme <news@acme.dev>'): Promise<Run> {
  let receiver: CountingReceiver | undefined;
  let webhookId: string | undefined;
  if (withWebhook) {
    receiver = await startCountingReceiver();
    webhookId = (await call(bench, 'POST', '/webhooks', { endpoint: receiver.url, events: Object.keys(EMAIL_EVENTS) })).id as string;
  }
  try {
    await accept(bench, total, html, from);
    const received = async () => (await sink.ask('stats')).received as number;
    const before = await received();
    const cpuAt = { server: cpuMs(bench.api.pid), sink: cpuMs(sink.child.pid!), postgres: databaseCpuMs(), bench: process.cpuUsage() };
    const cpuSince = (workers: number): Cpu => ({
      worker: workers,
      server: cpuMs(bench.api.pid) - cpuAt.server,
      sink: cpuMs(sink.child.pid!) - cpuAt.sink,
      postgres: databaseCpuMs() - cpuAt.postgres,
      bench: ((usage) => (usage.user + usage.system) / 1000)(process.cpuUsage(cpuAt.bench)),
    });
    const started = performance.now();
    // One process per delivery thread: `npm start` with DELIVERY_THREADS runs that many.
    const delivering = await Promise.all(Array.from({ length: bench.threads }, () => bench.startTarget('deliver', { SMTP_URL: sink.url })));
    try {
      // The sink's count is cheap to ask for; the database is read only once it has them all.
      let firstAt = 0;
      await waitFor('the sink to receive every email', async () => {
        const got = (await received()) - before;
        if (got > 0 && !firstAt) firstAt = performance.now();
        return got >= total;
      });
      await waitFor('every outcome to be recorded', async () => (await unrecorded(bench.store)) === 0);
      const seconds = (performance.now() - started) / 1000;
      const steady = (performance.now() - firstAt) / 1000;
      const workers = () => delivering.reduce((ms, deliver) => ms + cpuMs(deliver.child.pid!), 0);
      if (!receiver || !webhookId) return { cpu: cpuSince(workers()), seconds, steady };
      // Every event is recorded with its deliveries, so what is owed is known once the outcomes are.
      const owed = await deliveriesOf(bench.store, webhookId);
      const startedAt = Date.now() - (performance.now() - started);
      await waitFor('every webhook delivery to land', () => receiver.ids.size >= owed);
      const lastSeconds = (receiver.lastAt() - startedAt) / 1000;
      await waitFor('every webhook outcome to be recorded', async () => (await deliveriesOf(bench.store, webhookId, 'delivered')) >= owed);
      return { cpu: cpuSince(workers()), seconds, steady, hooks: { owed, lastSeconds } };
    } finally {
      await Promise.all(
        delivering.map((deliver) => {
          deliver.child.send('stop');
          return new Promise((resolve) => deliver.child.once('exit', resolve));
        }),
      );
    }
  } finally {
    if (webhookId) await call(bench, 'DELETE', `/webhooks/${webhookId}`);
    await receiver?.close();
  }
}

export const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
export const perSecond = (n: number, seconds: number) => Math.round(n / seconds).toLocaleString('en');

export async function benchDelivery(bench: DeliveryBench): Promise<void> {
  const sink = await bench.startTarget('sink');
  try {
    // Not measured: the first run after start-up found the sink and the server cold and took up to a
    // fifth longer, which favoured whichever kind of run came first.
    await deliverOnce(bench, sink, 1000, '<p>Warming up</p>', true);
    const sizes = [
      { name: 'small', label: 'small (under 2 KB of HTML)', bytes: 200 },
      { name: 'large', label: '20 KB of HTML', bytes: 20_000 },
    ].filter((size) => bench.sizes?.includes(size.name) ?? true);
    for (const { label, bytes } of sizes) {
      const total = bytes < 2000 ? 3000 : 1000;
      const html = `<p>${'Hello reader, here is the news of the week. '.repeat(Math.ceil(bytes / 46))}</p>`.slice(0, bytes);
      const without: Run[] = [];
      const withHooks: Run[] = [];
      const alone: number[] = [];
      const building: number[] = [];
      // Alternating, the first of each pair changing every round: a noisy neighbour or a growing
      // outbox slows both alike instead of whichever ran second.
      for (let round = 0; round < bench.rounds; round++) {
        for (const on of round % 2 === 0 ? [false, true] : [true, false]) {
          (on ? withHooks : without).push(await deliverOnce(bench, sink, total, html, on));
        }
        const nodemailer = await bench.startTarget('nodemailer', { SMTP_URL: sink.url, BENCH_NODEMAILER: JSON.stringify({ count: total, html }) });
        nodemailer.child.kill('SIGTERM');
        alone.push(nodemailer.first.seconds);
        building.push(nodemailer.first.buildingSeconds);
      }
      const off = median(without.map((r) => r.seconds));
      const on = median(withHooks.map((r) => r.seconds));
      const ratio = off / on;
      const steadyOff = median(without.map((r) => r.steady));
      const steadyOn = median(withHooks.map((r) => r.steady));
      const hooks = withHooks.map((r) => r.hooks!);
      const lag = median(withHooks.map((r) => r.hooks!.lastSeconds - r.seconds));
      const hookSeconds = median(hooks.map((h) => h.lastSeconds));
      const owed = median(hooks.map((h) => h.owed));
      const runs = `median of ${bench.rounds} alternating runs each`;
      const limit = median(alone);
      const share = limit / steadyOff;
      const shareTarget = bytes < 2000 ? TRANSPORT_TARGET.small : TRANSPORT_TARGET.large;
      console.log(`Delivery, ${label}, ${total} emails, from the worker's start to the last outcome recorded (${runs}):`);
      console.log(
        `  nodemailer alone, pre-built messages: ${limit.toFixed(2)}s = ${perSecond(total, limit)} emails/s; Mailroom with no webhook, from the first message: ` +
          `${perSecond(total, steadyOff)}/s = ${(share * 100).toFixed(1)}% of it (${share >= shareTarget ? 'meets' : 'SHORT of'} the ${shareTarget * 100}% target)`,
      );
      const built = median(building);
      console.log(
        `  for comparison, nodemailer building each message as it sends it, no database: ${built.toFixed(2)}s = ${perSecond(total, built)} emails/s = ` +
          `${((limit / built) * 100).toFixed(1)}% of pre-built; Mailroom, which builds its own, reaches ${((built / steadyOff) * 100).toFixed(1)}% of that`,
      );
      console.log(`  no webhook:      ${off.toFixed(2)}s = ${perSecond(total, off)} emails/s; ${perSecond(total, steadyOff)} from the first message`);
      console.log(
        `  one webhook on:  ${on.toFixed(2)}s = ${perSecond(total, on)} emails/s; ${perSecond(total, steadyOn)} from the first message; its ${owed.toLocaleString('en')} deliveries landed ${lag.toFixed(2)}s after the last outcome, ` +
          `${hookSeconds.toFixed(2)}s from the worker's start = ${perSecond(owed, hookSeconds)} deliveries/s`,
      );
      const each = (list: Run[]) => list.map((r) => r.seconds.toFixed(2)).join(', ');
      console.log(`  runs: no webhook ${each(without)}s; one webhook on ${each(withHooks)}s`);
      // Where the CPU went, per email: what a webhook adds, and on which side (the bench's receiver is not Mailroom's).
      const cpuOf = (list: Run[]) => (Object.keys(list[0]!.cpu) as (keyof Cpu)[]).map((part) => [part, median(list.map((r) => r.cpu[part])) / total] as const);
      const cpuLine = (list: Run[]) => cpuOf(list).map(([part, ms]) => `${part} ${(ms * 1000).toFixed(0)}`).join(', ');
      console.log(`  CPU µs an email, medians: no webhook: ${cpuLine(without)}; one webhook on: ${cpuLine(withHooks)} (${availableParallelism()} cores on this machine, shared by all of them)`);
      console.log(
        `  with / without: ${(ratio * 100).toFixed(1)}% (${ratio >= RATIO_TARGET ? 'meets' : 'SHORT of'} the ${RATIO_TARGET * 100}% target); ` +
          `${((steadyOff / steadyOn) * 100).toFixed(1)}% from the first message`,
      );
    }
  } finally {
    sink.child.kill('SIGTERM');
  }
}
