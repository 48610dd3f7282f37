// Kill -9 while a batch of 100 is being delivered; after a restart every accepted email is delivered.
// Delivery is at least once: duplicates are counted and reported, the target being zero.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_KEY } from '../support/server.ts';
import { startSmtpSink, type SmtpSink } from '../support/smtp.ts';

const root = new URL('../..', import.meta.url).pathname;
const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-crash-'));
let sink: SmtpSink;

beforeAll(async () => {
  // Slow replies keep the batch in flight long enough to be cut off.
  sink = await startSmtpSink({ delayMs: 25 });
});
afterAll(async () => {
  await sink.close();
  rmSync(dataDir, { recursive: true, force: true });
});

function start(): Promise<{ child: ChildProcess; url: string }> {
  const env = { ...process.env, DATA_DIR: dataDir, PORT: '0', MAILROOM_API_KEY: TEST_KEY, DATABASE_URL: '', SMTP_URL: sink.url, DELIVERY_LEASE_MS: '1500', RATE_LIMIT_PER_SECOND: '0' };
  const child = spawn(process.execPath, ['build/main.js'], { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk) => {
      out += chunk;
      const url = /"url":"([^"]+)".*Mailroom is listening/.exec(out)?.[1];
      if (url) resolve({ child, url });
    });
    child.on('exit', (code) => reject(new Error(`exited ${code}`)));
  });
}

describe('a crash mid-delivery', () => {
  it('loses nothing: every accepted email is delivered after a restart', async () => {
    const first = await start();
    const auth = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
    const items = Array.from({ length: 100 }, (_, n) => ({ from: 'a@acme.dev', to: `crash${n}@example.com`, subject: `crash ${n}`, text: 'x' }));
    const res = await fetch(`${first.url}/emails/batch`, { method: 'POST', headers: auth, body: JSON.stringify(items) });
    expect(res.status).toBe(200);
    const ids = ((await res.json()).data as { id: string }[]).map((d) => d.id);

    await sink.waitFor(10);
    first.child.kill('SIGKILL');
    await new Promise((resolve) => first.child.on('exit', resolve));
    const beforeRestart = sink.received.length;
    expect(beforeRestart).toBeLessThan(100);

    const second = await start();
    const unique = () => new Set(sink.received.map((r) => r.mail.messageId)).size;
    for (const deadline = Date.now() + 30_000; unique() < 100 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 500));

    const duplicates = sink.received.length - unique();
    console.log(`crash test: killed after ${beforeRestart} of 100 messages; ${unique()} distinct delivered, ${duplicates} duplicate(s)`);
    expect(unique()).toBe(100);
    for (const id of ids) {
      const email = await (await fetch(`${second.url}/emails/${id}`, { headers: auth })).json();
      expect(email.last_event).toBe('sent');
    }
    second.child.kill('SIGTERM');
    await new Promise((resolve) => second.child.on('exit', resolve));
  });
});
