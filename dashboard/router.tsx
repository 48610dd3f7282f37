// Every page has its own URL under /dashboard (the server answers any of them with the same shell), so
// pages can be bookmarked, reloaded and opened in a new tab. Navigation uses the History API.
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

export const BASE = '/dashboard';

export interface Location {
  /** The path below /dashboard, such as `/contacts/123`; `/` for the dashboard's root. */
  path: string;
  query: URLSearchParams;
}

const read = (): Location => ({ path: location.pathname.slice(BASE.length) || '/', query: new URLSearchParams(location.search) });

/** Asks whether to leave a page with work not saved; set by useLeaveGuard. */
let mayLeave: (() => boolean) | undefined;

/**
 * While `unsaved`, leaving the page asks first: by the dashboard's own links, by the browser's Back and
 * Forward, and by its reload, close or address bar. (Not where the page itself moves on, having saved
 * or deleted.)
 */
export function useLeaveGuard(unsaved: boolean): void {
  useEffect(() => {
    if (!unsaved) return;
    const ask = () => confirm('Leave this page? Your changes are not saved.');
    const warn = (event: BeforeUnloadEvent) => event.preventDefault();
    mayLeave = ask;
    addEventListener('beforeunload', warn);
    return () => {
      if (mayLeave === ask) mayLeave = undefined;
      removeEventListener('beforeunload', warn);
    };
  }, [unsaved]);
}

/**
 * Whether the page was just reached by navigating, in the page or by the browser's Back and Forward:
 * its heading then takes the focus, as a new document's start would, rather than leaving it on a link
 * that is gone. Cleared once that navigation has rendered, so that a reload or a change within a page
 * (a next page of a list) leaves the focus where it is.
 */
let arrived = false;
/** The address the page shows, to return to when Back or Forward is refused. */
let shown = location.href;
/** Set while navigate() moves on: its link has asked already. */
let navigating = false;
addEventListener('popstate', (event) => {
  // The History API cannot hold Back: the address has changed already. Refused, it is put back, and
  // the later listeners (useLocation) never hear of it.
  if (!navigating && mayLeave?.() === false) {
    history.pushState(null, '', shown);
    event.stopImmediatePropagation();
    return;
  }
  shown = location.href;
  arrived = true;
  setTimeout(() => (arrived = false));
});

/** True once, for the first page heading rendered after a navigation. */
export function takeArrival(): boolean {
  const was = arrived;
  arrived = false;
  return was;
}

/** Goes to a dashboard path, such as `/contacts?after=…`, adding it to the tab's history. */
export function navigate(to: string, { replace = false } = {}): void {
  history[replace ? 'replaceState' : 'pushState'](null, '', BASE + to);
  navigating = true;
  try {
    dispatchEvent(new PopStateEvent('popstate'));
  } finally {
    navigating = false;
  }
}

export function useLocation(): Location {
  const [current, setCurrent] = useState(read);
  useEffect(() => {
    const update = () => setCurrent(read());
    addEventListener('popstate', update);
    return () => removeEventListener('popstate', update);
  }, []);
  return current;
}

/** A link to a dashboard path that navigates without reloading; opening it in a new tab still works. */
export function Link({ to, children, current }: { to: string; children: ComponentChildren; current?: boolean }) {
  return (
    <a
      aria-current={current ? 'page' : undefined}
      href={BASE + to}
      onClick={(event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        if (mayLeave?.() === false) return;
        navigate(to);
      }}
    >
      {children}
    </a>
  );
}

/** Matches a path against a pattern such as `/contacts/:id`; returns the named parts, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split('/');
  const got = path.replace(/\/$/, '').split('/');
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (const [i, part] of want.entries()) {
    if (part.startsWith(':')) {
      // A part that is not well-formed percent-encoding names nothing: no page matches it.
      try {
        params[part.slice(1)] = decodeURIComponent(got[i]!);
      } catch {
        return null;
      }
    } else if (part !== got[i]) return null;
  }
  return params;
}
