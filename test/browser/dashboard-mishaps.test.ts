// The dashboard when things go wrong around a person using it: the bare /dashboard address, a network
// that drops a change, a double click, a time already past, a key revoked elsewhere mid-session, a link
// to something that does not exist or is not even well-formed, long unbroken text, and a phone's width.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey } from '../../server/apiKeys/key.ts';
import { chromiumPresent, launchChromium, openSignedIn } from '../support/dashboard.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { WAIT_MS } from '../support/until.ts';

describe.skipIf(!chromiumPresent)('the dashboard when things go wrong', () => {
  let browser: Browser;
  let server: TestServer;
  const opened: Page[] = [];
  const open = async (path = '/contacts', key = server.apiKey) => {
    const page = await openSignedIn(browser, server.url, key, path);
    page.on('dialog', (dialog) => void dialog.accept());
    opened.push(page);
    return page;
  };
  const api = (method: string, path: string, body?: unknown) => server.api(method, path, body);
  /** Whether anything on the page reaches past the right edge of its window. */
  const overflows = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);

  beforeAll(async () => {
    server = await startTestServer('sqlite');
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    for (const page of opened) await page.context().close();
    await browser?.close();
    await server?.close();
  });

  it('opens the contacts page at /dashboard and /dashboard/, with its address, rather than "Page not found"', async () => {
    const page = await open('/contacts');
    for (const root of ['/dashboard', '/dashboard/']) {
      await page.goto(server.url + root);
      await page.getByRole('heading', { level: 1, name: 'Contacts' }).waitFor();
      expect(new URL(page.url()).pathname).toBe('/dashboard/contacts');
      expect(await page.getByRole('link', { name: 'Contacts' }).getAttribute('aria-current')).toBe('page');
    }
  });

  it('says so when a change cannot reach the server, and keeps what was typed', async () => {
    const page = await open('/segments');
    await page.route('**/segments', (route) => (route.request().method() === 'POST' ? route.abort('connectionreset') : route.continue()));
    await page.getByLabel('Name').fill('Never made');
    await page.getByRole('button', { name: 'Create segment' }).click();
    await page.getByRole('alert').filter({ hasText: 'The server could not be reached' }).waitFor();
    expect(await page.getByLabel('Name').inputValue()).toBe('Never made');
    await page.unroute('**/segments');
  });

  it('keeps the list on screen when a change and the reload after it cannot reach the server, and one alert says so', async () => {
    await api('POST', '/topics', { name: 'Stays shown', default_subscription: 'opt_in' });
    const page = await open('/topics');
    await page.getByRole('cell', { name: 'Stays shown', exact: true }).waitFor();
    let down = true;
    await page.route(`${server.url}/topics*`, (route) => (down ? route.abort('connectionrefused') : route.continue()));
    await page.getByLabel('Name').fill('Made later');
    await page.getByRole('button', { name: 'Create topic' }).click();
    await page.getByRole('alert').filter({ hasText: 'The server could not be reached' }).waitFor();
    await new Promise((resolve) => setTimeout(resolve, 500)); // the reload after the failed change has answered
    expect(await page.getByRole('cell', { name: 'Stays shown', exact: true }).count()).toBe(1);
    expect(await page.getByRole('alert').count()).toBe(1);
    down = false;
    await page.getByRole('button', { name: 'Create topic' }).click();
    await page.getByRole('cell', { name: 'Made later', exact: true }).waitFor();
    expect(await page.getByRole('alert').count()).toBe(0);
    await page.unrouteAll();
  });

  it('makes one segment of a double click on Create, however slow the server', async () => {
    const page = await open('/segments');
    let posts = 0;
    await page.route('**/segments', async (route) => {
      if (route.request().method() === 'POST') {
        posts++;
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
      await route.continue();
    });
    await page.getByLabel('Name').fill('Clicked twice');
    await page.getByRole('button', { name: 'Create segment' }).dblclick();
    await page.getByRole('link', { name: 'Clicked twice' }).waitFor();
    expect(posts).toBe(1);
    const segments = (await api('GET', '/segments')).data as { name: string }[];
    expect(segments.filter((segment) => segment.name === 'Clicked twice')).toHaveLength(1);
    await page.unroute('**/segments');
  });

  it('refuses to schedule a broadcast for a time already past, which the API would send at once', async () => {
    const segment = await api('POST', '/segments', { name: 'Schedule slip' });
    const { id } = await api('POST', '/broadcasts', { segment_id: segment.id, from: 'news@acme.dev', subject: 'Hi', text: 'Hi' });
    const page = await open(`/broadcasts/${id}`);
    await page.getByLabel('Send at').fill('2001-01-01T10:00');
    await page.getByRole('button', { name: 'Schedule' }).click();
    await page.getByRole('alert').filter({ hasText: 'That time has passed' }).waitFor();
    expect((await api('GET', `/broadcasts/${id}`)).status).toBe('draft');
  });

  it('signs out, saying why, when its key is revoked elsewhere mid-session', async () => {
    const { id, key } = await createKey(server.store, 'revoked mid-session', 'full_access');
    const page = await open('/contacts', key);
    await api('DELETE', `/api-keys/${id}`);
    // The server trusts a key it read for a short while; the dashboard notices at the first refusal.
    await expect
      .poll(async () => {
        await page.getByRole('link', { name: 'Segments' }).click().catch(() => {});
        return page.getByLabel('API key').isVisible();
      }, { interval: 500 })
      .toBe(true);
    expect(await page.getByRole('alert').textContent()).toContain('no longer valid');
    expect(await page.evaluate(() => Object.values(sessionStorage))).toEqual([]);
  });

  it('shows a heading and the way back for a broadcast or template that does not exist, and the app for a malformed address', async () => {
    const page = await open('/contacts');
    for (const [path, title, back] of [
      ['/broadcasts/0d3c0a5e-1b7a-4c11-9e55-8c3f1f3f0e2a', 'Broadcast', 'All broadcasts'],
      ['/templates/no-such-template', 'Template', 'All templates'],
    ] as const) {
      await page.goto(`${server.url}/dashboard${path}`);
      await page.getByRole('heading', { level: 1, name: title }).waitFor();
      await page.getByRole('link', { name: back }).waitFor();
      expect(await page.getByRole('alert').textContent()).toMatch(/not found/i);
      expect(await page.title()).toBe(`${title} · Mailroom`);
    }
    const response = await page.goto(`${server.url}/dashboard/contacts/%E0%A4%A`);
    expect(response!.headers()['content-type']).toMatch(/^text\/html/);
    await page.getByRole('heading', { level: 1, name: 'Page not found' }).waitFor();
  });

  it('wraps long unbroken text instead of pushing the buttons off the page', async () => {
    await api('POST', '/webhooks', { endpoint: `https://hooks.example.com/${'x'.repeat(300)}`, events: ['email.sent'] });
    await api('POST', '/segments', { name: 'n'.repeat(200) });
    const page = await open('/webhooks');
    await page.getByRole('button', { name: 'Delete' }).first().waitFor();
    expect(await overflows(page)).toBe(false);
    await page.goto(`${server.url}/dashboard/segments`);
    await page.getByRole('button', { name: 'Delete' }).first().waitFor();
    expect(await overflows(page)).toBe(false);
  });

  it('keeps words whole in buttons, statuses and column heads beside long text, at 1280 px and at 375 px', async () => {
    // One email's long recipients used to take every column's room: "Delet/e", "Se/nt", dates on five lines.
    const to = Array.from({ length: 12 }, (_, n) => `a-very-long-recipient-address-number-${n}@subdomain.example.com`);
    await api('POST', '/emails', { from: 'team@acme.dev', to, subject: `A subject that goes on ${'and on '.repeat(20)}`, text: 'x' });
    await api('POST', '/webhooks', { endpoint: 'https://hooks.example.com/words', events: ['email.sent'] });
    const page = await open('/emails');
    /** Elements whose text is one word yet takes more than one line. */
    const broken = (selector: string) =>
      page.evaluate((selector) => {
        const lineHeight = (element: Element) => parseFloat(getComputedStyle(element).lineHeight) || 20;
        return [...document.querySelectorAll(selector)]
          .filter((element) => !/\s/.test(element.textContent!.trim()) && element.getBoundingClientRect().height > 1.5 * lineHeight(element) + 16)
          .map((element) => element.textContent);
      }, selector);
    for (const width of [1280, 375]) {
      await page.setViewportSize({ width, height: 900 });
      for (const path of ['/emails', '/webhooks', '/topics']) {
        await page.goto(`${server.url}/dashboard${path}`);
        await page.getByRole('heading', { level: 1 }).waitFor();
        await page.locator('table, p').first().waitFor();
        expect(await broken('button, .status, th'), `${path} at ${width} px`).toEqual([]);
      }
    }
  });

  it('makes one call of a double click on an action button past its confirm: one rotation, one secret shown', async () => {
    const { id } = await api('POST', '/webhooks', { endpoint: 'https://hooks.example.com/rotate-twice', events: ['email.sent'] });
    const page = await open('/webhooks');
    let rotations = 0;
    await page.route(`**/webhooks/${id}/signing-secret/rotate`, async (route) => {
      rotations++;
      await new Promise((resolve) => setTimeout(resolve, 500));
      await route.continue();
    });
    const row = page.getByRole('row').filter({ hasText: 'rotate-twice' });
    await row.getByRole('button', { name: 'Rotate secret' }).dblclick();
    await page.getByText('New signing secret of https://hooks.example.com/rotate-twice').waitFor();
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(rotations).toBe(1);
    // Deleting the webhook takes its secret off the page.
    await row.getByRole('button', { name: 'Delete' }).click();
    await row.waitFor({ state: 'detached' });
    expect(await page.getByText('New signing secret of https://hooks.example.com/rotate-twice').count()).toBe(0);
  });

  it('takes the secret shown at creation off the page once it is rotated, and names each row\'s buttons by endpoint', async () => {
    const page = await open('/webhooks');
    await page.getByLabel('Endpoint URL').fill('https://hooks.example.com/made-then-rotated');
    await page.getByRole('button', { name: 'Create webhook' }).click();
    await page.getByText('Signing secret of https://hooks.example.com/made-then-rotated').waitFor();
    await page.getByRole('button', { name: 'Rotate secret of https://hooks.example.com/made-then-rotated' }).click();
    await page.getByText('New signing secret of https://hooks.example.com/made-then-rotated').waitFor();
    // The secret from creation no longer signs alone: left on screen, it could be copied in place of the new one.
    expect(await page.getByText('Signing secret of https://hooks.example.com/made-then-rotated', { exact: true }).count()).toBe(0);
    for (const name of ['Disable', 'Delete']) expect(await page.getByRole('button', { name: `${name} https://hooks.example.com/made-then-rotated`, exact: true }).count()).toBe(1);
  });

  it('says what a proxy\'s error page without a message means, rather than an empty alert', async () => {
    const page = await open('/contacts');
    // The API's list only, not the page itself (the app is at /dashboard/segments).
    await page.route(`${server.url}/segments`, (route) => route.fulfill({ status: 502, contentType: 'text/html', body: '<html><body><h1>502 Bad Gateway</h1></body></html>' }));
    await page.goto(`${server.url}/dashboard/segments`);
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toMatch(/^The server answered 502.*Try again/);
    await page.unroute(`${server.url}/segments`);
  });

  it('says a contact with the address exists and keeps what was typed, rather than clearing the form', async () => {
    const existing = await api('POST', '/contacts', { email: 'already@example.com', first_name: 'Ada' });
    const page = await open('/contacts');
    const form = page.locator('form[aria-labelledby="new-contact"]');
    await form.getByLabel('Email').fill('already@example.com');
    await form.getByLabel('First name').fill('Bob');
    await page.getByRole('button', { name: 'Create contact' }).click();
    const alert = page.getByRole('alert').filter({ hasText: 'A contact with this address already exists' });
    await alert.waitFor();
    expect(await alert.getByRole('link', { name: 'Open it' }).getAttribute('href')).toBe(`/dashboard/contacts/${existing.id}`);
    expect(await form.getByLabel('First name').inputValue()).toBe('Bob');
    expect((await api('GET', `/contacts/${existing.id}`)).first_name).toBe('Ada');
  });

  it('takes no typing while a form is being sent, so that its answer cannot wipe out what was typed meanwhile', async () => {
    const page = await open('/contacts');
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route(`${server.url}/contacts`, async (route) => {
      if (route.request().method() === 'POST') await held;
      await route.continue();
    });
    const form = page.getByRole('form', { name: 'New contact' });
    await form.getByLabel('Email').fill('typed-while-sending@acme.dev');
    await form.getByRole('button', { name: 'Create contact' }).click();
    await expect.poll(() => form.getAttribute('aria-busy')).toBe('true');
    // The next contact, begun while the first is on its way: before, it was taken, then cleared with the form.
    await form.getByLabel('First name').focus();
    await page.keyboard.type('Second');
    await form.getByLabel('Unsubscribed').click({ force: true });
    expect(await form.getByLabel('First name').inputValue()).toBe('');
    expect(await form.getByLabel('Unsubscribed').isChecked()).toBe(false);
    release();
    await expect.poll(() => form.getAttribute('aria-busy')).toBe('false');
    await form.getByLabel('First name').fill('Editable again');
    expect(await form.getByLabel('First name').inputValue()).toBe('Editable again');
    const created = (await api('GET', '/contacts/typed-while-sending@acme.dev')) as { first_name?: string | null; unsubscribed: boolean };
    expect(created.first_name ?? null).toBeNull();
    expect(created.unsubscribed).toBe(false);
    await page.unroute(`${server.url}/contacts`);
  });

  it('refuses properties that would not all be saved: two of one name, a value without a name', async () => {
    const contact = await api('POST', '/contacts', { email: `props-${Date.now()}@acme.dev`, properties: { tier: 'bronze' } });
    const page = await open(`/contacts/${contact.id}`);
    const form = page.getByRole('form', { name: 'Details' });
    await form.getByRole('button', { name: 'Add property' }).click();
    await form.getByLabel('Property 2 name').fill('tier ');
    await form.getByLabel('Property 2 value').fill('silver');
    await form.getByRole('button', { name: 'Save contact' }).click();
    await form.getByRole('alert').filter({ hasText: 'Two properties are named “tier”' }).waitFor();
    await form.getByLabel('Property 2 name').fill('');
    await form.getByRole('button', { name: 'Save contact' }).click();
    await form.getByRole('alert').filter({ hasText: 'Property 2 has a value but no name' }).waitFor();
    expect(await form.getByText('Saved.').count()).toBe(0);
    expect((await api('GET', `/contacts/${contact.id}`)).properties).toEqual({ tier: 'bronze' });
    await form.getByLabel('Property 2 name').fill('plan');
    await form.getByRole('button', { name: 'Save contact' }).click();
    await form.getByText('Saved.').waitFor();
    expect((await api('GET', `/contacts/${contact.id}`)).properties).toEqual({ tier: 'bronze', plan: 'silver' });
  });

  it('stays on the page a person moved to when a search they left answers late', async () => {
    const email = `late-${Date.now()}@acme.dev`;
    await api('POST', '/contacts', { email });
    const page = await open('/contacts');
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let asked = false;
    await page.route(`${server.url}/contacts/${encodeURIComponent(email)}`, async (route) => {
      asked = true;
      await held;
      await route.continue();
    });
    await page.getByRole('search').getByLabel('Email address').fill(email);
    await page.getByRole('search').getByRole('button', { name: 'Find' }).click();
    await expect.poll(() => asked).toBe(true);
    await page.getByRole('link', { name: 'Topics' }).click();
    await page.getByRole('heading', { level: 1, name: 'Topics' }).waitFor();
    release();
    const answered = page.waitForResponse((response) => response.url().endsWith(encodeURIComponent(email)));
    await answered;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(new URL(page.url()).pathname).toBe('/dashboard/topics');
    await page.unrouteAll();
  });

  it('fills in a list opened while the server could not be reached, once it can be, without a reload', async () => {
    await api('POST', '/topics', { name: 'Back again', default_subscription: 'opt_in' });
    const page = await open('/contacts');
    let down = true;
    await page.route(`${server.url}/topics*`, (route) => (down ? route.abort('connectionrefused') : route.continue()));
    await page.getByRole('link', { name: 'Topics' }).click();
    await page.getByRole('alert').filter({ hasText: 'The server could not be reached' }).waitFor();
    down = false;
    await page.getByRole('cell', { name: 'Back again', exact: true }).first().waitFor({ timeout: WAIT_MS });
    expect(await page.getByRole('alert').count()).toBe(0);
    await page.unrouteAll();
  });

  it('keeps the focus somewhere after Send now replaces the draft with the sending broadcast, and says a template is published', async () => {
    const segment = await api('POST', '/segments', { name: 'Focus after send' });
    const { id } = await api('POST', '/broadcasts', { segment_id: segment.id, from: 'news@acme.dev', subject: 'Hi', text: 'Hi' });
    const page = await open(`/broadcasts/${id}`);
    await page.getByRole('button', { name: 'Send now' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('button', { name: 'Refresh' }).waitFor();
    const focused = () => page.evaluate(() => `${document.activeElement?.tagName} ${document.activeElement?.textContent}`);
    await expect.poll(focused).toMatch(/^H1 Broadcast: /);

    const template = await api('POST', '/templates', { name: 'Announced', html: '<p>Hi</p>' });
    await page.goto(`${server.url}/dashboard/templates/${template.id}`);
    await page.getByRole('button', { name: 'Publish' }).click();
    await page.getByRole('status').filter({ hasText: /^published$/ }).waitFor();
  });

  it('refuses a template variable with a fallback and no name; a save keeps the focus on the page', async () => {
    const page = await open('/templates/new');
    const form = page.getByRole('form', { name: 'Template' });
    await form.getByLabel('Name', { exact: true }).fill('Nameless variable');
    await form.getByLabel('HTML').fill('<p>Hi {{{A|you}}}</p>');
    await form.getByRole('button', { name: 'Add variable' }).click();
    await form.getByLabel('Variable 1 fallback').fill('orphan');
    await form.getByRole('button', { name: 'Create template' }).click();
    await form.getByRole('alert').filter({ hasText: 'Variable 1 has a fallback but no name' }).waitFor();
    expect(((await api('GET', '/templates')).data as { name: string }[]).some((t) => t.name === 'Nameless variable')).toBe(false);
    await form.getByLabel('Variable 1 name').fill('A');
    await form.getByRole('button', { name: 'Create template' }).click();
    await page.getByRole('heading', { level: 1, name: 'Template: Nameless variable' }).waitFor();
    // The editor is made afresh from what was saved: the focus, on Save, goes to the heading rather than to <body>.
    await page.getByLabel('Subject').fill('Changed');
    await page.getByRole('button', { name: 'Save template' }).focus();
    await page.keyboard.press('Enter');
    const focused = () => page.evaluate(() => `${document.activeElement?.tagName} ${document.activeElement?.textContent}`);
    await expect.poll(focused).toBe('H1 Template: Nameless variable');
  });

  it('adds the segment shown: after one is added, the choice moves to one the contact is not in', async () => {
    const contact = await api('POST', '/contacts', { email: 'segments-choice@example.com' });
    const first = await api('POST', '/segments', { name: 'Choice one' });
    const second = await api('POST', '/segments', { name: 'Choice two' });
    const page = await open(`/contacts/${contact.id}`);
    const select = page.getByLabel('Segment', { exact: true });
    await select.selectOption({ label: 'Choice one' });
    await page.getByRole('button', { name: 'Add to segment' }).click();
    await page.getByRole('link', { name: 'Choice one' }).waitFor();
    const shown = await select.evaluate((element: HTMLSelectElement) => element.options[element.selectedIndex]?.text ?? '');
    expect(shown).not.toBe('');
    expect(shown).not.toBe('Choice one');
    await select.selectOption({ label: 'Choice two' });
    await page.getByRole('button', { name: 'Add to segment' }).click();
    await page.getByRole('link', { name: 'Choice two' }).waitFor();
    const memberships = (await api('GET', `/contacts/${contact.id}/segments`)).data as { id: string }[];
    expect(memberships.map((segment) => segment.id).sort()).toEqual([first.id, second.id].sort());
  });

  it('fits a phone: at 375 px the sections sit above the page and nothing reaches past the edge', async () => {
    const page = await open('/contacts');
    await page.setViewportSize({ width: 375, height: 800 });
    for (const path of ['/contacts', '/broadcasts/new', '/emails', '/segments', '/nope']) {
      await page.goto(`${server.url}/dashboard${path}`);
      await page.getByRole('heading', { level: 1 }).waitFor();
      expect(await overflows(page), path).toBe(false);
      const nav = await page.getByRole('navigation', { name: 'Sections' }).boundingBox();
      const main = await page.locator('main').boundingBox();
      expect(main!.y, path).toBeGreaterThan(nav!.y + nav!.height - 1);
      expect(main!.width, path).toBeGreaterThan(340);
      // However short the page, the sections take their own height, not half the screen.
      expect(nav!.height, path).toBeLessThan(300);
    }
  });
});
