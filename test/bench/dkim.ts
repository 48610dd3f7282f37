// What DKIM signing costs delivery: the same emails, accepted through the API and delivered by a worker
// process to the SMTP sink as in test/bench/delivery.ts, from a verified domain (signed at delivery with
// its 2048-bit RSA key) and from a domain never registered (sent unsigned). The two alternate, the
// first of each pair changing every round, and their medians are compared. No webhook: only signing
// differs. Run by `npm run bench`.
import { availableParallelism } from 'node:os';
import { call, deliverOnce, median, perSecond, type Cpu, type DeliveryBench, type Run } from './delivery.ts';

/** Signed against unsigned small emails, as the issue asks: signing takes at most 15% of the rate. */
const RATIO_TARGET = { small: 0.85 };

// Domains of the same length, so that the messages differ by their signature alone.
const SIGNED_FROM = 'Acme <news@dkim.bench.dev>';
const UNSIGNED_FROM = 'Acme <news@none.bench.dev>';

/**
 * Registers the signing domain through the API, which makes its key as for any domain, then marks it
 * verified in the store directly: this bench is about signing, not DNS, so no record is looked up.
 * No check is scheduled (`next_check_at` stays null), so nothing looks it up later and fails it.
 */
async function verifiedDomain(bench: DeliveryBench, name: string): Promise<void> {
  const { id } = await call(bench, 'POST', '/domains', { name });
  await bench.store.database.db
    .updateTable('domains')
    .set({ status: 'verified', verified_at: new Date().toISOString(), record_status: JSON.stringify({ dkim: 'verified', spf: 'verified' }) })
    .where('id', '=', id)
    .execute();
  // The server reads its domains at most once a second: until it reads them again, it holds this one
  // unverified and refuses mail from it.
  await new Promise((resolve) => setTimeout(resolve, 1500));
}

export async function benchDkim(bench: DeliveryBench): Promise<void> {
  await verifiedDomain(bench, SIGNED_FROM.slice(SIGNED_FROM.indexOf('@') + 1, -1));
  const sink = await bench.startTarget('sink');
  const signedAtSink = async () => (await sink.ask('stats')).signed as number;
  try {
    // Not measured: the first run after start-up finds the sink and the server cold.
    await deliverOnce(bench, sink, 1000, '<p>Warming up</p>', false, SIGNED_FROM);
    const sizes = [
      { name: 'small', label: 'small (under 2 KB of HTML)', bytes: 200 },
      { name: 'large', label: '20 KB of HTML', bytes: 20_000 },
    ].filter((size) => bench.sizes?.includes(size.name) ?? true);
    for (const { name, label, bytes } of sizes) {
      const total = bytes < 2000 ? 3000 : 1000;
      const html = `<p>${'Hello reader, here is the news of the week. '.repeat(Math.ceil(bytes / 46))}</p>`.slice(0, bytes);
      const unsigned: Run[] = [];
      const signed: Run[] = [];
      for (let round = 0; round < bench.rounds; round++) {
        for (const sign of round % 2 === 0 ? [false, true] : [true, false]) {
          const before = await signedAtSink();
          const run = await deliverOnce(bench, sink, total, html, false, sign ? SIGNED_FROM : UNSIGNED_FROM);
          // A run that was not what it says would make the comparison meaningless: stop there.
          const got = (await signedAtSink()) - before;
          if (got !== (sign ? total : 0)) throw new Error(`dkim bench: ${got} of ${total} ${sign ? 'signed' : 'unsigned'} emails reached the sink signed`);
          (sign ? signed : unsigned).push(run);
        }
      }
      const off = median(unsigned.map((r) => r.seconds));
      const on = median(signed.map((r) => r.seconds));
      const steadyOff = median(unsigned.map((r) => r.steady));
      const steadyOn = median(signed.map((r) => r.steady));
      const ratio = off / on;
      console.log(`DKIM signing, ${label}, ${total} emails, from the worker's start to the last outcome recorded (median of ${bench.rounds} alternating runs each):`);
      console.log(`  unsigned (a domain not registered): ${off.toFixed(2)}s = ${perSecond(total, off)} emails/s; ${perSecond(total, steadyOff)} from the first message`);
      console.log(`  signed (a verified domain, RSA-2048): ${on.toFixed(2)}s = ${perSecond(total, on)} emails/s; ${perSecond(total, steadyOn)} from the first message`);
      const each = (list: Run[]) => list.map((r) => r.seconds.toFixed(2)).join(', ');
      console.log(`  runs: unsigned ${each(unsigned)}s; signed ${each(signed)}s`);
      const cpuOf = (list: Run[], part: keyof Cpu) => (median(list.map((r) => r.cpu[part])) / total) * 1000;
      const cpuLine = (list: Run[]) => (['worker', 'server', 'sink', 'postgres'] as const).map((part) => `${part} ${cpuOf(list, part).toFixed(0)}`).join(', ');
      console.log(
        `  CPU µs an email, medians: unsigned: ${cpuLine(unsigned)}; signed: ${cpuLine(signed)}; signing adds ${(cpuOf(signed, 'worker') - cpuOf(unsigned, 'worker')).toFixed(0)} µs of the worker's ` +
          `(${availableParallelism()} cores on this machine, shared by all of them)`,
      );
      const target = RATIO_TARGET[name as keyof typeof RATIO_TARGET];
      const verdict = target === undefined ? 'no target for this size' : `${ratio >= target ? 'meets' : 'SHORT of'} the ${target * 100}% target`;
      console.log(`  signed / unsigned: ${(ratio * 100).toFixed(1)}% (${verdict}); ${((steadyOff / steadyOn) * 100).toFixed(1)}% from the first message`);
    }
  } finally {
    sink.child.kill('SIGTERM');
  }
}
