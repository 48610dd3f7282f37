// `npm run screenshots`: every dashboard page at 1280×800, and some at a phone's 390 px, from a server
// seeded with believable data, written to generated/screenshots/<page>.png. Runs the built server
// (`npm run build` first) as a process on 127.0.0.1 with a fresh SQLite file and capture delivery, so
// sent mail has its events.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMailroomClient } from '../client/index.ts';
import { launchChromium } from '../test/support/dashboard.ts';
import { startServerProcess } from '../test/support/process.ts';
import { TEST_KEY } from '../test/support/server.ts';

const root = new URL('..', import.meta.url).pathname;
const out = join(root, 'generated/screenshots');
const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-screenshots-'));
const receiver = createServer((_req, res) => res.writeHead(204).end());
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const server = await startServerProcess({ DATA_DIR: dataDir, WEBHOOK_ALLOW_PRIVATE: 'true' });
const browser = await launchChromium();
try {
  const client = createMailroomClient({ baseUrl: server.url, apiKey: TEST_KEY });
  const must = async <T>(call: Promise<{ data?: T; error?: { message: string } }>): Promise<T> => {
    const { data, error } = await call;
    if (error || data === undefined) throw new Error(`seeding failed: ${error?.message}`);
    return data;
  };

  const people = [
    ['Ada', 'Lovelace', 'pro'], ['Grace', 'Hopper', 'team'], ['Alan', 'Turing', 'free'], ['Katherine', 'Johnson', 'pro'],
    ['Edsger', 'Dijkstra', 'free'], ['Barbara', 'Liskov', 'team'], ['Donald', 'Knuth', 'pro'], ['Margaret', 'Hamilton', 'team'],
    ['Ken', 'Thompson', 'free'], ['Radia', 'Perlman', 'pro'], ['Linus', 'Torvalds', 'free'], ['Frances', 'Allen', 'team'],
  ] as const;
  const newsletter = await must(client.POST('/segments', { body: { name: 'Newsletter' } }));
  await must(client.POST('/segments', { body: { name: 'Beta testers' } }));
  const product = await must(client.POST('/topics', { body: { name: 'Product updates', description: 'New features, once a month', default_subscription: 'opt_in' } }));
  await must(client.POST('/topics', { body: { name: 'Events', description: 'Meetups and webinars', default_subscription: 'opt_out' } }));
  const contacts: string[] = [];
  for (let i = 0; i < 30; i++) {
    const [first, last, plan] = people[i % people.length]!;
    const created = await must(
      client.contacts.create({
        email: `${first.toLowerCase()}.${last.toLowerCase()}${i < people.length ? '' : i}@example.com`,
        first_name: first,
        last_name: last,
        unsubscribed: i % 9 === 8,
        properties: { plan, company: `${last} & Co` },
        ...(i % 3 !== 2 && { segments: [{ id: newsletter.id }] }),
      }),
    );
    contacts.push(created.id);
  }

  const content = {
    from: 'Acme <news@acme.dev>',
    reply_to: 'support@acme.dev',
    segment_id: newsletter.id,
    topic_id: product.id,
    html: '<h1 style="font-family:sans-serif;color:#1f5fbf">Hello {{{FIRST_NAME|there}}}</h1><p style="font-family:sans-serif">Three things shipped this month, and your <b>{{{plan|free}}}</b> plan has them all.</p><p style="font-family:sans-serif"><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></p>',
  };
  const sent = await must(client.POST('/broadcasts', { body: { ...content, name: 'October product update', subject: 'What shipped in October', preview_text: 'Three things you asked for' } }));
  await must(client.POST('/broadcasts/{broadcast_id}/send', { params: { path: { broadcast_id: sent.id } }, body: {} }));
  const draft = await must(client.POST('/broadcasts', { body: { ...content, name: 'November product update', subject: 'Hi {{{FIRST_NAME|there}}}, November is here', preview_text: 'Faster sends, a dashboard' } }));

  const email = await must(
    client.emails.send({ from: 'Acme <billing@acme.dev>', to: 'ada.lovelace@example.com', subject: 'Your invoice for November', html: '<p style="font-family:sans-serif">Hi Ada, your invoice <b>#1042</b> is ready.</p>', headers: { 'X-Entity-Ref-ID': 'inv-1042' } }),
  );
  await must(client.emails.send({ from: 'Acme <hello@acme.dev>', to: 'grace.hopper@example.com', subject: 'Welcome to Acme', text: 'Welcome aboard, Grace.' }));

  await must(client.POST('/templates', { body: { name: 'Welcome email', alias: 'welcome', from: 'Acme <hello@acme.dev>', subject: 'Welcome, {{{FIRST_NAME|friend}}}', html: '<p>Hi {{{FIRST_NAME}}}, your trial lasts {{{TRIAL_DAYS|30}}} days.</p>', variables: [{ key: 'FIRST_NAME', type: 'string', fallback_value: 'friend' }, { key: 'TRIAL_DAYS', type: 'number', fallback_value: 30 }] } }));
  await client.POST('/templates/{template_id}/publish', { params: { path: { template_id: 'welcome' } } });
  const template = await must(client.POST('/templates', { body: { name: 'Password reset', subject: 'Reset your password', html: '<p>Follow <a href="{{{RESET_URL}}}">this link</a> to choose a new password.</p>', variables: [{ key: 'RESET_URL', type: 'string' }] } }));
  await must(client.POST('/webhooks', { body: { endpoint: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`, events: ['email.sent', 'email.delivered', 'email.bounced', 'email.complained'] } }));
  await must(client.POST('/suppressions', { body: { email: 'bounced.once@example.com' } }));
  await must(client.POST('/api-keys', { body: { name: 'Production web app', permission: 'sending_access' } }));

  // The broadcast's emails are delivered by the server's delivery thread (capture mode).
  for (let tries = 0; ; tries++) {
    const { data } = await client.broadcasts.get(sent.id);
    if (data?.status === 'sent' || tries > 100) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  await new Promise((resolve) => setTimeout(resolve, 1000));

  const pages: [string, string][] = [
    ['contacts', '/contacts'], ['contact', `/contacts/${contacts[0]}`], ['segments', '/segments'], ['segment', `/segments/${newsletter.id}`],
    ['topics', '/topics'], ['broadcasts', '/broadcasts'], ['broadcast', `/broadcasts/${draft.id}`], ['broadcast-sent', `/broadcasts/${sent.id}`],
    ['emails', '/emails'], ['email', `/emails/${email.id}`], ['templates', '/templates'], ['template', `/templates/${template.id}`],
    ['webhooks', '/webhooks'], ['suppressions', '/suppressions'], ['api-keys', '/api-keys'],
  ];
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  await page.goto(`${server.url}/dashboard`);
  await page.getByLabel('API key').waitFor();
  await page.screenshot({ path: join(out, 'sign-in.png') });
  await page.getByLabel('API key').fill(TEST_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  for (const [name, path] of pages) {
    await page.goto(`${server.url}/dashboard${path}`);
    await page.getByRole('heading', { level: 1 }).waitFor();
    await page.waitForFunction(() => document.querySelectorAll('[role=status] progress').length === 0);
    await page.waitForLoadState('networkidle');
    await page.screenshot({ path: join(out, `${name}.png`) });
    console.log(`generated/screenshots/${name}.png`);
  }
  // A phone's width: the list pages as cards, and the sections' menu opened.
  await page.setViewportSize({ width: 390, height: 844 });
  for (const [name, path] of pages.filter(([name]) => ['contacts', 'emails', 'webhooks', 'suppressions'].includes(name))) {
    await page.goto(`${server.url}/dashboard${path}`);
    await page.getByRole('heading', { level: 1 }).waitFor();
    await page.waitForFunction(() => document.querySelectorAll('[role=status] progress').length === 0);
    await page.screenshot({ path: join(out, `${name}-390.png`) });
    console.log(`generated/screenshots/${name}-390.png`);
  }
  await page.getByRole('button', { name: 'Menu' }).click();
  await page.screenshot({ path: join(out, 'menu-390.png') });
  console.log('generated/screenshots/menu-390.png');
} finally {
  await browser.close();
  server.child.kill('SIGTERM');
  await server.exited;
  receiver.close();
  rmSync(dataDir, { recursive: true, force: true });
}
