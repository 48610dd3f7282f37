// Every page has its own URL under /dashboard (the server answers any of them with the same shell), so
// pages can be bookmarked, reloaded and opened in a new tab. Navigation uses the History API.
import type { ComponentChildren } from 'preact';
import { useEffect, useLayoutEffect, useState } from 'preact/hooks';

export const BASE = '/dashboard';

export interface Location {
  /** The path below /dashboard, such as `/contacts/123`; `/` for the dashboard's root. */
  path: string;
  query: URLSearchParams;
}

const read = (): Location => ({ path: location.pathname.slice(BASE.length) || '/', query: new URLSearchParams(location.search) });

/** Asks whether to leave a page with work not saved; set by useLeaveGuard. */
let mayLeave: (() => boolean) | undefined;

/** Whether the page may be left now: true, or what the person said when asked about unsaved work. */
export const leavingAllowed = (): boolean => mayLeave?.() !== false;

/**
 * While `unsaved`, leaving the page asks first: by the dashboard's own links, by the browser's Back and
 * Forward, and by its reload, close or address bar. (Not where the page itself moves on, having saved
 * or deleted.)
 */
export function useLeaveGuard(unsaved: boolean): void {
  // Armed before the page is painted: once "Unsaved changes" shows, Back and Forward ask.
  useLayoutEffect(() => {
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
 * The path just reached by navigating, in the page or by the browser's Back and Forward: its heading
 * takes the focus when it first renders, as a new document's start would, rather than leaving it on a
 * link that is gone. A reload, or a change of the query alone (a list's next page), sets none.
 */
let arrivedAt: string | undefined;
/** Where the page stands in the tab's history, counted in the entries the dashboard pushed. */
let position: number = history.state?.at ?? 0;
/** Set while navigate() moves on (its link has asked already), or while a refused Back or Forward is undone. */
let navigating = false;
let undoing = false;
let shownPath = location.pathname;
addEventListener('popstate', (event) => {
  const to: number = event.state?.at ?? 0;
  if (undoing) {
    undoing = false;
    event.stopImmediatePropagation();
    return;
  }
  // The History API cannot hold Back or Forward: the address has changed already. Refused, the tab
  // goes back as many entries as it moved, and the later listeners (useLocation) never hear of it.
  if (!navigating && mayLeave?.() === false) {
    undoing = true;
    history.go(position - to);
    event.stopImmediatePropagation();
    return;
  }
  position = to;
  if (location.pathname !== shownPath) arrivedAt = location.pathname;
  shownPath = location.pathname;
});

/** Counts the page now shown as arrived at, as signing in shows it: its heading takes the focus. */
export function arriveHere(): void {
  arrivedAt = location.pathname;
}

/** True once, for the first page heading rendered at the path a navigation reached. */
export function takeArrival(): boolean {
  if (arrivedAt !== location.pathname) return false;
  arrivedAt = undefined;
  return true;
}

/** Goes to a dashboard path, such as `/contacts?after=…`, adding it to the tab's history. */
export function navigate(to: string, { replace = false } = {}): void {
  if (!replace) position++;
  history[replace ? 'replaceState' : 'pushState']({ at: position }, '', BASE + to);
  navigating = true;
  try {
    dispatchEvent(new PopStateEvent('popstate', { state: history.state }));
  } finally {
    navigating = false;
  }
}

/**
 * navigate() for after an answer, taken before asking: it does nothing once the person has moved to
 * another page meanwhile, where a late answer must not pull them back.
 */
export function navigateOnAnswer(): typeof navigate {
  const from = location.href;
  return (to, options) => {
    if (location.href === from) navigate(to, options);
  };
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
export function Link({ to, children, current, class: className }: { to: string; children: ComponentChildren; current?: boolean; class?: string }) {
  return (
    <a
      class={className}
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
