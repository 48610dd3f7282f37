// The unsubscribe page as a preferences page: the topics a contact may see there (public ones, and
// private ones it opted in to, as the contract's TopicVisibility says), each with its current choice,
// changed or left by a plain form post; a deleted topic's link, which must write no choice for a topic
// that is gone. Over HTTP, on SQLite and PostgreSQL, forms posted as a browser without script posts them.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'";
type Subscription = 'opt_in' | 'opt_out';

/** What a browser would post from the page's preferences form, with the button pressed. */
function preferencesForm(html: string, action: 'save' | 'everything'): URLSearchParams {
  const form = /<form method="post" autocomplete="off">((?:(?!<\/form>).)*name="action"(?:(?!<\/form>).)*)<\/form>/.exec(html);
  expect(form, 'the preferences form').not.toBeNull();
  const fields = new URLSearchParams();
  for (const [, name, value] of form![1]!.matchAll(/<input type="radio" name="([^"]+)" value="([^"]+)" checked>/g)) fields.append(name!, value!);
  expect(form![1]).toContain(`name="action" value="${action}"`);
  fields.append('action', action);
  return fields;
}

/** The topics the page shows, by id, with the choice checked for each, in page order. */
function shown(html: string): [string, Subscription][] {
  return [...html.matchAll(/<input type="radio" name="topic:([^"]+)" value="(opt_in|opt_out)" checked>/g)].map(([, id, value]) => [id!, value as Subscription]);
}

describe.each(backends)('the unsubscribe page as preferences on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server?.close());

  const db = () => server.store.database.db;
  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await server.request(path, { method, headers: { 'content-type': 'application/json' }, ...(body !== undefined && { body: JSON.stringify(body) }) });
    return { status: res.status, body: await res.json() };
  }
  const topic = async (name: string, default_subscription: Subscription, visibility: 'public' | 'private', description?: string) =>
    (await call('POST', '/topics', { name, default_subscription, visibility, ...(description && { description }) })).body.id as string;
  const contact = async (topics: { id: string; subscription: Subscription }[] = []) =>
    (await call('POST', '/contacts', { email: `${randomUUID()}@example.com`, topics })).body.id as string;
  const link = (contactId: string, scope: 'topic' | 'broadcast', id: string) => `${server.url}/unsubscribe/${server.links.tokens.sign({ contactId, scope, id })}`;
  const post = (url: string, body: URLSearchParams | string) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: body.toString() });
  const page = async (url: string) => {
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toBe(CSP);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    return res.text();
  };
  const choices = async (contactId: string) =>
    Object.fromEntries((await db().selectFrom('contact_topics').select(['topic_id', 'subscription']).where('contact_id', '=', contactId).execute()).map((r) => [r.topic_id, r.subscription]));
  const unsubscribed = async (contactId: string) => (await db().selectFrom('contacts').select('unsubscribed').where('id', '=', contactId).executeTakeFirstOrThrow()).unsubscribed;

  it('shows public topics and the private ones the contact opted in to, each with its choice; GET changes nothing', async () => {
    const publicIn = await topic('News <weekly>', 'opt_in', 'public', 'What we shipped & why.');
    const publicOut = await topic('Events', 'opt_out', 'public');
    const privateIn = await topic('Beta', 'opt_in', 'private');
    const privateOut = await topic('Partners', 'opt_out', 'private');
    const privateChosen = await topic('Insiders', 'opt_out', 'private');
    const privateLeft = await topic('Surveys', 'opt_in', 'private');
    const reader = await contact([
      { id: privateChosen, subscription: 'opt_in' },
      { id: privateLeft, subscription: 'opt_out' },
    ]);
    const before = await choices(reader);

    const everything = await page(link(reader, 'broadcast', randomUUID()));
    const mine = shown(everything).filter(([id]) => [publicIn, publicOut, privateIn, privateOut, privateChosen, privateLeft].includes(id));
    expect(mine).toEqual([
      [publicIn, 'opt_in'],
      [publicOut, 'opt_out'],
      [privateIn, 'opt_in'],
      [privateChosen, 'opt_in'],
    ]);
    expect(everything).toContain('<legend>News &lt;weekly&gt;</legend><p>What we shipped &amp; why.</p>');
    expect(everything).not.toMatch(/Partners|Surveys/);
    // The link's own one-click button is kept, and the form works without script.
    expect(everything).toMatch(/Stop receiving <strong>all our emails<\/strong>\?<\/p><form method="post" autocomplete="off"><input type="hidden" name="List-Unsubscribe" value="One-Click">/);
    expect(everything).not.toMatch(/<(script|img|link)\b|https?:/);

    // A private topic's own link shows it first, opted out as the reader is, so it can come back.
    const surveys = await page(link(reader, 'topic', privateLeft));
    expect(shown(surveys)[0]).toEqual([privateLeft, 'opt_out']);
    // Left already: the page says so rather than asking again, and its one-click button is gone.
    expect(surveys).toContain('You no longer receive <strong>Surveys</strong>.');
    expect(surveys).not.toContain('Stop receiving');
    expect(surveys).not.toContain('value="One-Click"');
    expect(surveys).toContain('name="action" value="everything"');
    expect(await choices(reader)).toEqual(before);
    expect(await unsubscribed(reader)).toBe(0);
  });

  it('records the choices the form posts, back in as well as out, for shown topics only', async () => {
    const weekly = await topic('Weekly', 'opt_in', 'public');
    const offers = await topic('Offers', 'opt_out', 'public');
    const hidden = await topic('Hidden', 'opt_out', 'private');
    const reader = await contact();
    const url = link(reader, 'topic', weekly);

    // Leave the link's topic with its one-click button, then come back to it from the page.
    expect((await post(url, 'List-Unsubscribe=One-Click')).status).toBe(200);
    expect(await choices(reader)).toEqual({ [weekly]: 'opt_out' });

    const fields = preferencesForm(await page(url), 'save');
    expect(fields.get(`topic:${weekly}`)).toBe('opt_out');
    fields.set(`topic:${weekly}`, 'opt_in');
    fields.set(`topic:${offers}`, 'opt_in');
    // Forged fields: a private topic it never saw, and nonsense, are ignored.
    fields.set(`topic:${hidden}`, 'opt_in');
    fields.set('topic:not-a-topic', 'opt_in');
    const saved = await post(url, fields);
    expect(saved.status).toBe(200);
    expect(saved.headers.get('content-security-policy')).toBe(CSP);
    const answer = await saved.text();
    expect(answer).toContain('Your choices are saved');
    expect(answer).toContain('<li>Weekly: you get these</li>');
    expect(answer).toContain('<li>Offers: you get these</li>');
    expect(await choices(reader)).toMatchObject({ [weekly]: 'opt_in', [offers]: 'opt_in' });
    expect(await choices(reader)).not.toHaveProperty(hidden);
    const listed = (await call('GET', `/contacts/${reader}/topics`)).body.data;
    expect(listed).toContainEqual(expect.objectContaining({ id: offers, subscription: 'opt_in' }));
    expect(shown(await page(url))).toContainEqual([offers, 'opt_in']);
    expect(await unsubscribed(reader)).toBe(0);
  });

  it("unsubscribes from everything with the form's other button; refuses an unknown action or choice; one-click still wins", async () => {
    const weekly = await topic('Daily', 'opt_in', 'public');
    const reader = await contact();
    const url = link(reader, 'topic', weekly);
    const unknown = await post(url, 'action=maybe');
    expect(unknown.status).toBe(422);
    expect(await unknown.json()).toMatchObject({ name: 'validation_error', message: 'The `action` must be one of `save`, `everything`.' });
    // A choice the form never offers saves nothing, rather than a page saying the choices are saved.
    const undecided = await post(url, `action=save&topic:${weekly}=opt_out&topic:${weekly}x=maybe`);
    expect(await undecided.json()).toMatchObject({ statusCode: 422, name: 'validation_error', message: `The \`topic:${weekly}x\` field must be \`opt_in\` or \`opt_out\`.` });
    expect(await choices(reader)).toEqual({});
    // The form only takes a form: JSON is refused for its media type, whether or not it reads as JSON.
    for (const body of ['{"action":"everything"}', '{bad', 'null']) {
      const json = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      expect(json.status, body).toBe(415);
      expect(await json.json()).toMatchObject({ statusCode: 415, name: 'unsupported_media_type' });
    }
    expect(await unsubscribed(reader)).toBe(0);
    const wrongClick = await post(url, 'List-Unsubscribe=Yes');
    expect(await wrongClick.json()).toMatchObject({ statusCode: 422, name: 'validation_error', message: 'The `List-Unsubscribe` must be `One-Click`.' });
    // A mail client's one-click, whatever else comes with it, leaves the link's topic only.
    expect((await post(url, `List-Unsubscribe=One-Click&action=everything`)).status).toBe(200);
    expect(await unsubscribed(reader)).toBe(0);
    expect(await choices(reader)).toEqual({ [weekly]: 'opt_out' });

    const left = await post(url, preferencesForm(await page(url), 'everything'));
    expect(left.status).toBe(200);
    expect(await left.text()).toContain('You are unsubscribed from <strong>all our emails</strong>');
    expect(await unsubscribed(reader)).toBe(1);
    const after = await page(url);
    expect(after).toContain('You are unsubscribed from <strong>all our emails</strong>, so you get none of the topics below.');
    expect(after).not.toContain('value="everything"');
  });

  it("answers a deleted topic's link without writing a choice for it, and offers to leave everything", async () => {
    const doomed = await topic('Doomed', 'opt_in', 'public');
    const reader = await contact();
    const url = link(reader, 'topic', doomed);
    expect(await page(url)).toContain('Stop receiving <strong>Doomed</strong>?');
    expect((await call('DELETE', `/topics/${doomed}`)).status).toBe(200);

    const html = await page(url);
    expect(html).toContain('The topic this link was for no longer exists');
    expect(html).not.toMatch(/Stop receiving|List-Unsubscribe/);
    expect(shown(html).map(([id]) => id)).not.toContain(doomed);

    for (const body of ['List-Unsubscribe=One-Click', '', `action=save&topic:${doomed}=opt_out`]) {
      const res = await post(url, body);
      expect(res.status, body).toBe(200);
      const answer = await res.text();
      if (!body.startsWith('action')) expect(answer).toContain('no longer exists');
    }
    expect(await db().selectFrom('contact_topics').selectAll().where('topic_id', '=', doomed).execute()).toEqual([]);
    expect(await unsubscribed(reader)).toBe(0);

    // What the page offers instead: leaving everything.
    expect((await post(url, preferencesForm(html, 'everything'))).status).toBe(200);
    expect(await unsubscribed(reader)).toBe(1);
  });

  it('leaves no choice behind for a topic deleted while its link is posted', async () => {
    const reader = await contact();
    for (let round = 0; round < 10; round++) {
      const racing = await topic(`Racing ${round}`, 'opt_in', 'public');
      const [posted, deleted] = await Promise.all([post(link(reader, 'topic', racing), 'List-Unsubscribe=One-Click'), call('DELETE', `/topics/${racing}`)]);
      expect([posted.status, deleted.status]).toEqual([200, 200]);
      expect(await db().selectFrom('contact_topics').selectAll().where('topic_id', '=', racing).execute()).toEqual([]);
    }
  });

  it('shows no more topics than its form may post, and says so; the form it shows is accepted', async () => {
    const many = [];
    for (let i = 0; i < 25; i++) many.push(await topic(`Many ${i}`, 'opt_in', 'public'));
    const reader = await contact();
    const url = link(reader, 'broadcast', randomUUID());
    const html = await page(url);
    expect(shown(html)).toHaveLength(19);
    expect(html).toContain('Some topics are not shown here');
    const fields = preferencesForm(html, 'save');
    for (const [name] of fields) if (name.startsWith('topic:')) fields.set(name, 'opt_out');
    const saved = await post(url, fields);
    expect(saved.status).toBe(200);
    expect(Object.values(await choices(reader))).toEqual(Array(19).fill('opt_out'));
  });

  it('answers 404 for a contact that is gone, whatever the form asks', async () => {
    const weekly = await topic('Gone', 'opt_in', 'public');
    const reader = await contact();
    const url = link(reader, 'topic', weekly);
    expect((await call('DELETE', `/contacts/${reader}`)).status).toBe(200);
    expect((await fetch(url)).status).toBe(404);
    for (const body of ['List-Unsubscribe=One-Click', 'action=everything', `action=save&topic:${weekly}=opt_out`]) {
      const res = await post(url, body);
      expect(res.status, body).toBe(404);
      expect(await res.json()).toMatchObject({ name: 'not_found', message: 'Unsubscribe link not found' });
    }
    expect(await choices(reader)).toEqual({});
  });
});
