// The dashboard end to end, in Debian's Chromium against the built server with its delivery thread
// (capture mode, so mail is delivered and has its events): sign in; create a contact, a segment and a
// topic and put the contact in the segment; write a broadcast in the dashboard and read it back with
// the official `resend` SDK; send it and follow its emails in the log to their events; open an email
// whose HTML carries scripts and prove none ran; cancel a scheduled email; rotate a webhook's signing
// secret; create an API key and revoke it.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { Resend } from 'resend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumPresent, launchChromium, openSignedIn } from '../support/dashboard.ts';
import { startServerProcess, type ServerProcess } from '../support/process.ts';
import { TEST_KEY } from '../support/server.ts';
import { WAIT_MS } from '../support/until.ts';

// What an email's HTML tries when its scripts run: change its own page, reach the API, tell the dashboard.
const HOSTILE = `<p id="mark">static</p>
<script>document.getElementById('mark').textContent = 'changed'; fetch('/contacts?from=frame-script'); parent.postMessage('script ran', '*'); try { parent.document.title = 'pwned' } catch {}</script>
<img src="data:," onerror="fetch('/contacts?from=frame-onerror'); parent.postMessage('handler ran', '*')">
<a id="away" href="https://example.com/away">away</a>`;

describe.skipIf(!chromiumPresent)('the dashboard, end to end', () => {
  let browser: Browser;
  let server: ServerProcess;
  let page: Page;
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-dashboard-'));
  const api = (path: string, init: RequestInit = {}) => fetch(server.url + path, { ...init, headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json', ...init.headers } });

  beforeAll(async () => {
    server = await startServerProcess({ DATA_DIR: dataDir });
    browser = await launchChromium();
    page = await openSignedIn(browser, server.url, TEST_KEY);
    page.on('dialog', (dialog) => void dialog.accept());
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    server?.child.kill('SIGTERM');
    await server?.exited;
    rmSync(dataDir, { recursive: true, force: true });
  });

  const go = async (path: string) => {
    await page.goto(`${server.url}/dashboard${path}`);
    await page.getByRole('heading', { level: 1 }).waitFor();
  };

  let segmentId = '';
  let topicId = '';
  let broadcastId = '';

  it('creates a contact, a segment and a topic, and puts the contact in the segment', async () => {
    await page.getByLabel('Email', { exact: true }).fill('ada@example.com');
    await page.getByLabel('First name').fill('Ada');
    await page.getByRole('button', { name: 'Create contact' }).click();
    await page.getByRole('link', { name: 'ada@example.com' }).waitFor();

    await go('/segments');
    await page.getByLabel('Name').fill('Readers');
    await page.getByRole('button', { name: 'Create segment' }).click();
    await page.getByRole('link', { name: 'Readers' }).waitFor();
    await go('/topics');
    await page.getByLabel('Name').fill('Product news');
    await page.getByRole('button', { name: 'Create topic' }).click();
    await page.getByRole('cell', { name: 'Product news', exact: true }).waitFor();

    const segments = (await (await api('/segments')).json()) as { data: { id: string; name: string }[] };
    segmentId = segments.data.find((s) => s.name === 'Readers')!.id;
    topicId = ((await (await api('/topics')).json()) as { data: { id: string }[] }).data[0]!.id;

    await go('/contacts');
    await page.getByRole('link', { name: 'ada@example.com' }).click();
    await page.getByLabel('Segment', { exact: true }).selectOption({ label: 'Readers' });
    await page.getByRole('button', { name: 'Add to segment' }).click();
    await page.getByRole('button', { name: 'Remove from Readers' }).waitFor();
    const members = (await (await api(`/segments/${segmentId}/contacts`)).json()) as { data: { email: string }[] };
    expect(members.data.map((c) => c.email)).toEqual(['ada@example.com']);
  });

  it('writes a broadcast that the resend SDK reads back with every field the dashboard set', async () => {
    await go('/broadcasts/new');
    const fields: [string, string][] = [
      ['Name', 'November news'],
      ['From', 'Acme <news@acme.dev>'],
      ['Reply-to', 'help@acme.dev'],
      ['Subject', 'Hi {{{FIRST_NAME|there}}}'],
      ['Preview text', 'What is new'],
      ['HTML', '<p>Hello {{{FIRST_NAME|there}}}</p>'],
      ['Text', 'Hello {{{FIRST_NAME|there}}}'],
    ];
    for (const [label, value] of fields) await page.getByLabel(label, { exact: true }).fill(value);
    await page.getByLabel('Segment', { exact: true }).selectOption({ label: 'Readers' });
    await page.getByLabel('Topic', { exact: true }).selectOption({ label: 'Product news' });
    // The preview renders for a chosen contact, as the server will.
    await page.getByLabel('Preview as').selectOption({ label: 'ada@example.com' });
    await page.getByTestId('preview-subject').filter({ hasText: 'Hi Ada' }).waitFor();
    await page.getByRole('button', { name: 'Create draft' }).click();
    await page.waitForURL(/\/dashboard\/broadcasts\/[0-9a-f-]{36}$/);
    broadcastId = page.url().split('/').at(-1)!;

    const resend = new Resend(TEST_KEY, { baseUrl: server.url });
    const { data, error } = await resend.broadcasts.get(broadcastId);
    expect(error).toBeNull();
    expect(data).toMatchObject({
      id: broadcastId,
      name: 'November news',
      from: 'Acme <news@acme.dev>',
      reply_to: ['help@acme.dev'],
      subject: 'Hi {{{FIRST_NAME|there}}}',
      preview_text: 'What is new',
      segment_id: segmentId,
      topic_id: topicId,
      html: '<p>Hello {{{FIRST_NAME|there}}}</p>',
      text: 'Hello {{{FIRST_NAME|there}}}',
      status: 'draft',
    });
  });

  it('sends the broadcast, and its email is in the log with its events', async () => {
    await page.getByRole('button', { name: 'Send now' }).click();
    // While it goes out the page reads it again by itself: no Refresh needed to see it sent.
    await page.locator('.status', { hasText: /^sent$/ }).first().waitFor({ timeout: WAIT_MS });

    // The log lists a broadcast's emails under their subjects as sent, personalized, as each email's own page shows it.
    await go('/emails');
    await page.getByRole('link', { name: 'Hi Ada' }).waitFor();
    expect(await page.getByRole('link', { name: /\{\{\{/ }).count()).toBe(0);
    await page.getByLabel('Status').selectOption({ label: 'Delivered' });
    await page.waitForURL(/last_event=delivered/);
    await page.getByRole('link', { name: 'Hi Ada' }).click();
    await page.getByRole('heading', { name: 'Hi Ada', level: 1 }).waitFor();
    await page.getByRole('heading', { name: 'Events' }).waitFor();
    for (const type of ['email.queued', 'email.sent', 'email.delivered']) await page.locator('ol.timeline strong', { hasText: type }).waitFor();
    // Capture mode keeps the raw message: its headers are shown.
    await page.locator('pre', { hasText: 'List-Unsubscribe-Post: List-Unsubscribe=One-Click' }).first().waitFor();
  });

  it('shows an email whose HTML carries scripts without running any of them', async () => {
    const sent = (await (await api('/emails', { method: 'POST', body: JSON.stringify({ from: 'a@acme.dev', to: 'ada@example.com', subject: 'Hostile', html: HOSTILE }) })).json()) as { id: string };
    const requests: string[] = [];
    page.on('request', (request) => requests.push(request.url()));
    await go(`/emails/${sent.id}`);
    await page.evaluate(() => {
      (window as unknown as { heard: unknown[] }).heard = [];
      addEventListener('message', (event) => (window as unknown as { heard: unknown[] }).heard.push(event.data));
    });
    const frame = page.locator('iframe[title="Message HTML"]');
    await frame.waitFor();
    expect(await frame.getAttribute('sandbox')).toBe('');
    await page.frameLocator('iframe[title="Message HTML"]').locator('#mark').waitFor();
    await page.waitForTimeout(1000);
    expect(await page.frameLocator('iframe[title="Message HTML"]').locator('#mark').textContent()).toBe('static');
    expect(await page.evaluate(() => (window as unknown as { heard: unknown[] }).heard)).toEqual([]);
    expect(requests.filter((url) => url.includes('from=frame'))).toEqual([]);
    expect(await page.title()).not.toBe('pwned');
    // A link in it does nothing: followed, it replaced the message with the browser's "blocked" page.
    await page.frameLocator('iframe[title="Message HTML"]').locator('#away').click({ force: true });
    await page.waitForTimeout(500);
    expect(await page.frameLocator('iframe[title="Message HTML"]').locator('#mark').textContent()).toBe('static');

    // The probe can tell: the same HTML in a frame allowed to run scripts, on a page without the dashboard's policy, runs.
    const control = await browser.newPage();
    await control.setContent('<iframe sandbox="allow-scripts"></iframe>');
    await control.evaluate((html) => {
      (window as unknown as { heard: unknown[] }).heard = [];
      addEventListener('message', (event) => (window as unknown as { heard: unknown[] }).heard.push(event.data));
      document.querySelector('iframe')!.srcdoc = html;
    }, HOSTILE);
    await control.waitForFunction(() => (window as unknown as { heard: unknown[] }).heard.length >= 2);
    expect(await control.evaluate(() => (window as unknown as { heard: unknown[] }).heard)).toEqual(expect.arrayContaining(['script ran', 'handler ran']));
    await control.close();
  });

  it("lists an email's attachments, and a click saves the file rather than showing it, even an HTML one", async () => {
    const page_ = '<html><body><script>document.title = "pwned"</script>an attachment</body></html>';
    const body = { from: 'a@acme.dev', to: 'ada@example.com', subject: 'With files', html: '<p>See <img src="cid:logo"></p>', attachments: [{ filename: 'notes.html', content: Buffer.from(page_).toString('base64') }, { filename: 'logo.png', content: 'iVBORw0KGgo=', content_id: 'logo' }] };
    const sent = (await (await api('/emails', { method: 'POST', body: JSON.stringify(body) })).json()) as { id: string };
    await go(`/emails/${sent.id}`);
    await page.getByRole('heading', { name: 'Attachments' }).waitFor();
    expect(await page.locator('ul.attachments li').allTextContents()).toEqual([`notes.html text/html, ${Buffer.byteLength(page_)} bytes`, 'logo.png image/png, 8 bytes, shown in the message as cid:logo']);
    const downloading = page.waitForEvent('download');
    await page.getByRole('link', { name: 'notes.html' }).click();
    const download = await downloading;
    expect(download.suggestedFilename()).toBe('notes.html');
    const saved = await download.path();
    expect(readFileSync(saved, 'utf8')).toBe(page_);
    expect(await page.title()).not.toBe('pwned');
    expect(page.url()).toContain(`/dashboard/emails/${sent.id}`);
  });

  it('shows when a scheduled email will go out, and cancels it', async () => {
    const body = { from: 'a@acme.dev', to: 'ada@example.com', subject: 'Later', text: 'x', scheduled_at: new Date(Date.now() + 3600_000).toISOString() };
    const sent = (await (await api('/emails', { method: 'POST', body: JSON.stringify(body) })).json()) as { id: string };
    // An email not yet sent has no raw message: asking for it anyway logged a 404 in the console.
    const errors: string[] = [];
    const onConsole = (message: { type(): string; text(): string }) => void (message.type() === 'error' && errors.push(message.text()));
    page.on('console', onConsole);
    await go(`/emails/${sent.id}`);
    await page.getByText('Scheduled for').waitFor();
    await page.getByText('Not sent: there are no headers yet.').waitFor();
    page.off('console', onConsole);
    expect(errors).toEqual([]);
    expect(await page.locator('dt:has-text("Scheduled for") + dd time').getAttribute('datetime')).toBe(body.scheduled_at);
    await page.getByRole('button', { name: 'Cancel email' }).click();
    await page.locator('.status-canceled').waitFor();
    expect(await page.getByRole('button', { name: 'Cancel email' }).count()).toBe(0);
    expect(((await (await api(`/emails/${sent.id}`)).json()) as { last_event: string }).last_event).toBe('canceled');
  });

  it("rotates a webhook's signing secret and shows the new one", async () => {
    const endpoint = 'https://hooks.example.com/rotating';
    const created = (await (await api('/webhooks', { method: 'POST', body: JSON.stringify({ endpoint, events: ['email.sent'] }) })).json()) as { id: string; signing_secret: string };
    await go('/webhooks');
    await page.getByRole('row', { name: /rotating/ }).getByRole('button', { name: 'Rotate secret' }).click();
    const shown = await page.getByLabel(`New signing secret of ${endpoint}`).inputValue();
    const stored = ((await (await api(`/webhooks/${created.id}`)).json()) as { signing_secret: string }).signing_secret;
    expect(shown).toBe(stored);
    expect(shown).not.toBe(created.signing_secret);
  });

  it('creates an API key, shows its token once, and revokes it', async () => {
    await go('/api-keys');
    await page.getByLabel('Name').fill('Temporary');
    await page.getByLabel('Permission').selectOption({ label: 'Sending access' });
    await page.getByRole('button', { name: 'Create API key' }).click();
    const token = await page.getByLabel('API key “Temporary”').inputValue();
    expect(token).toMatch(/^re_[0-9A-Za-z]{32}$/);
    const send = () => fetch(`${server.url}/emails`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ from: 'a@acme.dev', to: 'b@example.com', subject: 'x', text: 'x' }) });
    expect((await send()).status).toBe(200);
    await page.getByRole('row', { name: /Temporary/ }).waitFor();
    expect(await page.getByRole('table').textContent()).not.toContain(token);
    await page.getByRole('button', { name: 'Revoke Temporary' }).click();
    await page.getByRole('row', { name: /Temporary/ }).waitFor({ state: 'detached' });
    expect((await send()).status).toBe(403);
  });
});
