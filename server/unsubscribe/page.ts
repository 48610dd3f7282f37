// The two small pages behind an unsubscribe link. Self-contained (no script, no image, no font from
// anywhere), so that the strict Content-Security-Policy they are served with holds, and nothing the
// reader's mail client or browser fetches tells a third party who unsubscribed.
import { escapeHtml } from '../templates/render.ts';

/** What the reader leaves: a topic, by its name, or all email. */
export type Leaving = { topic: string } | 'everything';

const STYLE = 'body{font:16px/1.5 system-ui,sans-serif;margin:0;padding:3rem 1rem;color:#1a1a1a;background:#f6f6f6}main{max-width:28rem;margin:auto;padding:2rem;background:#fff;border-radius:8px}h1{font-size:1.4rem;margin-top:0}button{font:inherit;padding:.6rem 1.2rem;border:0;border-radius:6px;background:#1a1a1a;color:#fff;cursor:pointer}';

const what = (leaving: Leaving) => (leaving === 'everything' ? 'all our emails' : escapeHtml(leaving.topic));

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="robots" content="noindex"><title>${title}</title><style>${STYLE}</style></head><body><main>${body}</main></body></html>`;
}

/**
 * The page a GET shows: it only asks. The form posts back to this very URL (no action: the page's own
 * address, whatever prefix PUBLIC_URL has), with the field a one-click unsubscribe sends.
 */
export function askPage(leaving: Leaving): string {
  return page(
    'Unsubscribe',
    `<h1>Unsubscribe</h1><p>Stop receiving <strong>${what(leaving)}</strong>?</p><form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>`,
  );
}

export function donePage(leaving: Leaving): string {
  return page('Unsubscribed', `<h1>You are unsubscribed</h1><p>You are unsubscribed from <strong>${what(leaving)}</strong>.</p>`);
}
