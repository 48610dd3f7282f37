// The dashboard against a careless or deceived person: a draft's fields emptied and saved, work left
// unsaved by a click elsewhere, a second webhook refused after the first one's secret was shown, a file
// name that hides its type behind a right-to-left override, and an address in a table on a phone.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumPresent, launchChromium, openSignedIn } from '../support/dashboard.ts';
import { startTestServer, TEST_KEY, type TestServer } from '../support/server.ts';

describe.skipIf(!chromiumPresent)('the dashboard used carelessly', () => {
  let browser: Browser;
  let server: TestServer;
  const opened: Page[] = [];
  /** A signed-in page whose confirm() dialogs are answered with `answer`, each one's text kept in `asked`. */
  const open = async (path: string, { answer = true, width = 1280 } = {}) => {
    const page = await openSignedIn(browser, server.url, server.apiKey, path);
    await page.setViewportSize({ width, height: 800 });
    const asked: string[] = [];
    page.on('dialog', (dialog) => {
      asked.push(dialog.message());
      void (answer ? dialog.accept() : dialog.dismiss());
    });
    opened.push(page);
    return Object.assign(page, { asked });
  };
  const api = (method: string, path: string, body?: unknown) => server.api(method, path, body);
  const draft = async () => {
    const segment = await api('POST', '/segments', { name: `Careless ${Math.random()}` });
    return api('POST', '/broadcasts', {
      segment_id: segment.id,
      name: 'Kept name',
      from: 'news@acme.dev',
      subject: 'Hi',
      reply_to: 'help@acme.dev',
      preview_text: 'Old preview',
      html: '<p>Old html</p>',
      text: 'Old text',
    });
  };

  beforeAll(async () => {
    server = await startTestServer('sqlite');
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    for (const page of opened) await page.context().close();
    await browser?.close();
    await server?.close();
  });

  it('saves a draft whose reply-to, preview text and text were emptied as empty, and shows a name it cannot empty as still there', async () => {
    const { id } = await draft();
    const page = await open(`/broadcasts/${id}`);
    await page.getByLabel('Subject', { exact: true }).waitFor();
    for (const label of ['Name', 'Reply-to', 'Preview text', 'Text']) await page.getByLabel(label, { exact: true }).fill('');
    await page.getByRole('button', { name: 'Save draft' }).click();
    // Read back after saving: the name, which cannot be emptied, is in the form again.
    await expect.poll(() => page.getByLabel('Name', { exact: true }).inputValue()).toBe('Kept name');

    const stored = await api('GET', `/broadcasts/${id}`);
    expect(stored).toMatchObject({ name: 'Kept name', html: '<p>Old html</p>' });
    expect(stored.reply_to ?? []).toEqual([]);
    expect(stored.preview_text ?? '').toBe('');
    expect(stored.text ?? '').toBe('');
    expect(await page.getByText('Unsaved changes').count()).toBe(0);
  });

  it('asks before a link elsewhere drops a draft not saved, and stays with it when told to', async () => {
    const { id } = await draft();
    const page = await open('/broadcasts', { answer: false });
    await page.locator(`a[href="/dashboard/broadcasts/${id}"]`).click();
    await page.getByLabel('Subject', { exact: true }).fill('Typed, not saved');
    await page.getByRole('link', { name: 'Emails' }).click();
    expect(page.asked).toEqual(['Leave this page? Your changes are not saved.']);
    expect(new URL(page.url()).pathname).toBe(`/dashboard/broadcasts/${id}`);
    expect(await page.getByLabel('Subject', { exact: true }).inputValue()).toBe('Typed, not saved');
    // The browser's Back asks too; refused, the page and its address stay.
    await page.goBack({ waitUntil: 'commit' });
    await expect.poll(() => page.asked.length).toBe(2);
    // Refused, the move is undone by a move back, which the browser makes after the dialog closes.
    await expect.poll(() => new URL(page.url()).pathname).toBe(`/dashboard/broadcasts/${id}`);
    expect(await page.getByLabel('Subject', { exact: true }).inputValue()).toBe('Typed, not saved');

    // Saved, it leaves without asking.
    await page.getByRole('button', { name: 'Save draft' }).click();
    await page.getByText('Unsaved changes').waitFor({ state: 'detached' });
    await page.getByRole('link', { name: 'Emails' }).click();
    await page.getByRole('heading', { level: 1, name: 'Emails' }).waitFor();
    expect(page.asked).toHaveLength(2);
  });

  it('undoes a refused Forward without adding to the history, and puts the focus on a page that loads before its heading', async () => {
    const { id } = await draft();
    let answer = true;
    const page = await open('/broadcasts');
    page.removeAllListeners('dialog');
    page.on('dialog', (dialog) => void (page.asked.push(dialog.message()), answer ? dialog.accept() : dialog.dismiss()));
    await page.locator(`a[href="/dashboard/broadcasts/${id}"]`).click();
    // The draft loads before its heading is shown: the heading still takes the focus once it is.
    await expect.poll(() => page.evaluate(() => `${document.activeElement?.tagName} ${document.activeElement?.textContent}`)).toBe('H1 Broadcast: Kept name');
    await page.getByRole('link', { name: 'Segments' }).click();
    await page.getByRole('heading', { level: 1, name: 'Segments' }).waitFor();
    await page.goBack();
    await expect.poll(() => page.getByLabel('Subject', { exact: true }).inputValue()).toBe('Hi');
    await page.getByLabel('Subject', { exact: true }).fill('Typed, not saved');
    await page.getByText('Unsaved changes').waitFor();
    answer = false;
    await page.goForward({ waitUntil: 'commit' });
    await expect.poll(() => page.asked.length).toBe(1);
    await expect.poll(() => new URL(page.url()).pathname).toBe(`/dashboard/broadcasts/${id}`);
    expect(await page.getByLabel('Subject', { exact: true }).inputValue()).toBe('Typed, not saved');
    answer = true;
    await page.goBack();
    await page.getByRole('heading', { level: 1, name: 'Broadcasts' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/dashboard/broadcasts');
  });

  it("asks before a link or Sign out drops a contact's unsaved details", async () => {
    const { id } = await api('POST', '/contacts', { email: `unsaved-${Date.now()}@example.com`, first_name: 'Kept' });
    const page = await open(`/contacts/${id}`, { answer: false });
    await expect.poll(() => page.getByLabel('First name').inputValue()).toBe('Kept');
    await page.getByLabel('First name').fill('Typed');
    await page.getByRole('link', { name: 'Emails' }).click();
    await page.getByRole('button', { name: 'Sign out' }).click();
    expect(page.asked).toEqual(['Leave this page? Your changes are not saved.', 'Leave this page? Your changes are not saved.']);
    expect(new URL(page.url()).pathname).toBe(`/dashboard/contacts/${id}`);
    expect(await page.getByLabel('First name').inputValue()).toBe('Typed');
    expect(await page.getByRole('button', { name: 'Sign out' }).count()).toBe(1);
  });

  it('keeps showing a webhook signing secret when the next webhook is refused', async () => {
    const page = await open('/webhooks');
    const endpoint = page.getByLabel('Endpoint URL');
    await endpoint.fill('https://hooks.example.com/first');
    await page.getByRole('button', { name: 'Create webhook' }).click();
    const secret = page.getByLabel('Signing secret of https://hooks.example.com/first');
    await secret.waitFor();
    const shown = await secret.inputValue();
    expect(shown).toMatch(/^whsec_/);

    await endpoint.fill('ftp://hooks.example.com/second');
    await page.getByRole('button', { name: 'Create webhook' }).click();
    await page.getByRole('alert').waitFor();
    expect(await secret.inputValue()).toBe(shown);
  });

  it("shows a file name's direction controls as code points, and they do not reverse the text after it", async () => {
    const { id } = await api('POST', '/emails', {
      from: 'billing@acme.dev',
      to: 'someone@example.com',
      subject: 'Your invoice',
      text: 'Attached.',
      attachments: [{ filename: 'invoice\u202Efdp.exe', content: Buffer.from('MZ').toString('base64') }],
    });
    const page = await open(`/emails/${id}`);
    const link = page.locator('.attachments a');
    await link.waitFor();
    expect(await link.textContent()).toBe('invoice[U+202E]fdp.exe');
    expect(await link.evaluate((element) => getComputedStyle(element).unicodeBidi)).toBe('isolate');
  });

  it('signs in with a key pasted with its "Bearer ", and says in words that a key with an emoji is none', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    opened.push(page);
    await page.goto(`${server.url}/dashboard/contacts`);
    await page.getByLabel('API key').fill('re_test🙂');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'That is not an API key: a key is re_ followed by letters and digits.' }).waitFor();
    await page.getByLabel('API key').fill(`Bearer ${TEST_KEY}`);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Contacts' }).waitFor();
  });

  it('gives an address room in a table on a phone rather than a line for every letter or two', async () => {
    await api('POST', '/contacts', { email: 'careless.reader@example.com', first_name: 'Careless', last_name: 'Reader' });
    const page = await open('/contacts', { width: 375 });
    const row = page.getByRole('row').filter({ hasText: 'careless.reader' });
    await row.waitFor();
    const cell = row.getByRole('cell').filter({ hasText: 'careless.reader' });
    const lineHeight = await cell.evaluate((element) => parseFloat(getComputedStyle(element).lineHeight) || 20);
    const { height } = (await cell.boundingBox())!;
    // Padding aside, two or three lines at most: 'careless.reader@example.com' is 27 letters.
    expect(height).toBeLessThan(4 * lineHeight + 16);
  });

  it('offers the first page when a page of a list starts after a contact deleted since', async () => {
    await api('POST', '/contacts', { email: 'still.here@example.com' });
    const { id } = await api('POST', '/contacts', { email: 'gone.soon@example.com' });
    await api('DELETE', `/contacts/${id}`);
    const page = await open(`/contacts?after=${id}`);
    await page.getByRole('alert').waitFor();
    await page.getByRole('link', { name: 'Back to the first page' }).click();
    await page.getByRole('row').filter({ hasText: 'still.here' }).waitFor();
    expect(new URL(page.url()).search).toBe('');
    expect(await page.getByRole('alert').count()).toBe(0);
  });
});
