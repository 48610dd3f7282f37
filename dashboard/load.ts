// Reading what a page shows from the API, and making a change from a list's page: the hooks every
// page's data goes through.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import type { MailroomError } from './api.ts';

/** What a call to the client returns, reduced to what a page needs. */
type Outcome<T> = { data: T; error?: undefined } | { data?: undefined; error: MailroomError };

export interface Loaded<T> {
  data: T | undefined;
  error: MailroomError | undefined;
  loading: boolean;
  reload(): void;
}

/** The waits before reading again what could not be read for a while (the server or its database unreachable): 2 s, doubling, to 30 s. */
const RETRY_FIRST_MS = 2000;
const RETRY_LONGEST_MS = 30_000;

/**
 * Runs `load` when the page opens and whenever `deps` change; a slower, older answer never overwrites a
 * newer one. An answer that says to try again later (503: the server, or its database, out of reach)
 * is tried again while the page is shown, so that a page opened during an outage fills in once it ends;
 * one that was read already keeps showing what it read meanwhile.
 */
export function useLoad<T>(load: () => Promise<Outcome<T>>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: MailroomError; loading: boolean }>({ loading: true });
  const [generation, setGeneration] = useState(0);
  const retries = useRef(0);
  const lastDeps = useRef<unknown[]>();
  useEffect(() => {
    let current = true;
    // Read again for the same page (a reload, a retry), not for another one.
    const again = lastDeps.current?.length === deps.length && deps.every((dep, at) => Object.is(dep, lastDeps.current![at]));
    lastDeps.current = deps;
    let retry: ReturnType<typeof setTimeout> | undefined;
    setState((previous) => ({ ...previous, loading: true }));
    load().then(
      (outcome) => {
        if (!current) return;
        const outage = outcome.error?.statusCode === 503;
        // What is on screen stays through an outage (a change that failed reloads the list, which fails
        // too): the change's own error says what happened, and the list is read again once it ends.
        setState((previous) => (outage && again && previous.data !== undefined ? { ...previous, loading: false } : { data: outcome.data, error: outcome.error, loading: false }));
        if (!outage) return void (retries.current = 0);
        retry = setTimeout(() => setGeneration((n) => n + 1), Math.min(RETRY_FIRST_MS * 2 ** retries.current++, RETRY_LONGEST_MS));
      },
      (error: Error) => current && setState({ error: { statusCode: 500, name: 'internal_server_error', message: error.message }, loading: false }),
    );
    return () => {
      current = false;
      clearTimeout(retry);
    };
  }, [...deps, generation]);
  const reload = useCallback(() => setGeneration((n) => n + 1), []);
  return { ...state, data: state.data, error: state.error, reload };
}

/**
 * A change made from a list's page: `run` calls the API, keeps its error for an ErrorNote (or clears
 * the last one), reloads the list either way, and tells whether the change was made.
 */
export function useAction(reload: () => void): [MailroomError | null, (call: () => Promise<{ error?: MailroomError }>) => Promise<boolean>] {
  const [error, setError] = useState<MailroomError | null>(null);
  const run = useCallback(
    async (call: () => Promise<{ error?: MailroomError }>) => {
      const { error } = await call();
      setError(error ?? null);
      reload();
      return !error;
    },
    [reload],
  );
  return [error, run];
}

