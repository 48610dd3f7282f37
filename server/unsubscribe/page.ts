// The small pages behind an unsubscribe link. Self-contained (no script, no image, no font from
// anywhere), so that the strict Content-Security-Policy they are served with holds, and nothing the
// reader's mail client or browser fetches tells a third party who unsubscribed. Every form posts back
// to the page's own URL (no action: the page's own address, whatever prefix PUBLIC_URL has) and works
// without script.
import type { SubscribedTopic } from '../store/topics.ts';
import { escapeHtml } from '../templates/render.ts';

/** What the reader leaves: a topic, by its name, or all email. */
export type Leaving = { topic: string } | 'everything';

/** The preferences form's fields: `action`, and one `topic:<id>` per topic shown, `opt_in` or `opt_out`. */
export const ACTION_FIELD = 'action';
export const TOPIC_FIELD_PREFIX = 'topic:';

/** What the page a GET shows knows of the reader. */
export interface Standing {
  /** What the link is for: its topic (`undefined` once the topic is deleted, `left` once the reader left it), or all email. */
  link: { topic: string | undefined; left?: boolean } | 'everything';
  /** Whether the contact is unsubscribed from all email already. */
  unsubscribed: boolean;
  /** The topics shown (the link's first), with the contact's subscription to each. */
  topics: SubscribedTopic[];
  /** Whether there were more topics than a form may carry. */
  more: boolean;
}

const STYLE =
  'body{font:16px/1.5 system-ui,sans-serif;margin:0;padding:3rem 1rem;color:#1a1a1a;background:#f6f6f6}main{max-width:28rem;margin:auto;padding:2rem;background:#fff;border-radius:8px}h1{font-size:1.4rem;margin-top:0}button{font:inherit;padding:.6rem 1.2rem;border:0;border-radius:6px;background:#1a1a1a;color:#fff;cursor:pointer}' +
  'h2{font-size:1.1rem;margin-top:2rem}fieldset{border:1px solid #ddd;border-radius:6px;margin:0 0 1rem;padding:.5rem 1rem}legend{font-weight:600}fieldset p{margin:0 0 .5rem;color:#555}label{display:inline-block;margin-right:1.2rem}button+button{margin-left:.5rem}button.other{background:#fff;color:#1a1a1a;border:1px solid #1a1a1a}' +
  // A topic's name or description without spaces, as long as the API allows, wraps within the page.
  'main{overflow-wrap:anywhere}fieldset{min-width:0}' +
  // The browser's own focus ring is black on the black buttons; buttons that wrap keep a gap between them.
  ':focus-visible{outline:3px solid #2563eb;outline-offset:2px}button{margin:0 .5rem .5rem 0}button+button{margin-left:0}';

const EVERYTHING = 'all our emails';
const what = (leaving: Leaving) => (leaving === 'everything' ? EVERYTHING : escapeHtml(leaving.topic));
/** A plain link back to the page (a GET, which changes nothing), to change one's choices again. */
const BACK = '<p><a href="">Choose which emails you get</a></p>';

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="robots" content="noindex"><title>${title}</title><style>${STYLE}</style></head><body><main>${body}</main></body></html>`;
}

/** The form a mail client's one-click unsubscribe sends too (RFC 8058): the link's own unsubscribe. */
const oneClick = (label: string) =>
  `<form method="post" autocomplete="off"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">${label}</button></form>`;

function topicChoice({ id, name, description, subscription }: SubscribedTopic): string {
  const field = escapeHtml(TOPIC_FIELD_PREFIX + id);
  const radio = (value: SubscribedTopic['subscription'], label: string) =>
    `<label><input type="radio" name="${field}" value="${value}"${subscription === value ? ' checked' : ''}> ${label}</label>`;
  const about = description ? `<p>${escapeHtml(description)}</p>` : '';
  return `<fieldset><legend>${escapeHtml(name)}</legend>${about}${radio('opt_in', 'Send me these')}${radio('opt_out', 'Stop these')}</fieldset>`;
}

/**
 * The page a GET shows: it only asks. First what the link is for, with the button a one-click
 * unsubscribe would press; then each topic shown with the reader's choice, to change any of them
 * (the first button, which Enter presses, saves them), and a button to leave all email.
 */
export function askPage({ link, unsubscribed, topics, more }: Standing): string {
  const parts = ['<h1>Unsubscribe</h1>'];
  if (unsubscribed) parts.push(`<p>You are unsubscribed from <strong>${EVERYTHING}</strong>${topics.length > 0 ? ', so you get none of the topics below' : ''}.</p>`);
  const gone = link !== 'everything' && link.topic === undefined;
  if (gone) parts.push('<p>The topic this link was for no longer exists: you will get no more of its emails.</p>');
  // Nothing to ask of a link once the reader has left what it is for: it says so instead.
  const left = link !== 'everything' && link.topic !== undefined && link.left;
  if (left) parts.push(`<p>You no longer receive <strong>${escapeHtml(link.topic!)}</strong>.</p>`);
  const leaving: Leaving | undefined = link === 'everything' ? (unsubscribed ? undefined : link) : link.topic === undefined || left ? undefined : { topic: link.topic };
  if (leaving) parts.push(`<p>Stop receiving <strong>${what(leaving)}</strong>?</p>${oneClick('Unsubscribe')}`);

  const buttons = [
    ...(topics.length > 0 ? [`<button type="submit" name="${ACTION_FIELD}" value="save">Save my choices</button>`] : []),
    // The link's own button leaves everything already when the link is for everything.
    ...(link !== 'everything' && !unsubscribed ? [`<button type="submit" name="${ACTION_FIELD}" value="everything" class="other">Unsubscribe from ${EVERYTHING}</button>`] : []),
  ];
  if (buttons.length === 0) return page('Unsubscribe', parts.join(''));
  const heading = topics.length > 0 ? '<h2>Choose what you receive</h2>' : '';
  const rest = more ? `<p>Some topics are not shown here; unsubscribing from ${EVERYTHING} covers them too.</p>` : '';
  parts.push(`${heading}<form method="post" autocomplete="off">${topics.map(topicChoice).join('')}${rest}${buttons.join('')}</form>`);
  return page('Unsubscribe', parts.join(''));
}

export function donePage(leaving: Leaving): string {
  return page('Unsubscribed', `<h1>You are unsubscribed</h1><p>You are unsubscribed from <strong>${what(leaving)}</strong>.</p>${BACK}`);
}

/** The answer to a one-click unsubscribe from a topic that was deleted since: nothing to leave. */
export function goneTopicPage(): string {
  return page(
    'Unsubscribed',
    `<h1>You are unsubscribed</h1><p>The topic this link was for no longer exists: you will get no more of its emails.</p><form method="post" autocomplete="off"><button type="submit" name="${ACTION_FIELD}" value="everything">Unsubscribe from ${EVERYTHING}</button></form>${BACK}`,
  );
}

/** The answer to the preferences form: each choice recorded. */
export function savedPage(recorded: SubscribedTopic[], unsubscribed: boolean): string {
  const lines = recorded.map(({ name, subscription }) => `<li>${escapeHtml(name)}: ${subscription === 'opt_in' ? 'you get these' : 'you no longer get these'}</li>`);
  const list = lines.length > 0 ? `<ul>${lines.join('')}</ul>` : '<p>No topic was changed.</p>';
  const note = unsubscribed ? `<p>You are still unsubscribed from <strong>${EVERYTHING}</strong>, so you get none of them.</p>` : '';
  return page('Choices saved', `<h1>Your choices are saved</h1>${list}${note}${BACK}`);
}

/**
 * The answer to a browser whose link is not found (cut short by a mail client, changed, or naming a
 * contact deleted since): a page saying so, rather than the API's JSON error.
 */
export function linkNotFoundPage(): string {
  return page(
    'Link not found',
    '<h1>This unsubscribe link does not work</h1><p>It may have been cut short or changed on its way to you, or it is for an address that is no longer on our list.</p><p>Open the link again from the email itself, or reply to the email to ask to be removed.</p>',
  );
}
