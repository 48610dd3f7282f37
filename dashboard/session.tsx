// Who is signed in. The key is kept in sessionStorage: this tab only, gone when the tab closes or on
// sign-out, never in a cookie or localStorage.
import { createContext, type ComponentChildren } from 'preact';
import { useContext, useState } from 'preact/hooks';
import { connect, type MailroomClient, type MailroomError } from './api.ts';
import { arriveHere } from './router.tsx';

const STORAGE_KEY = 'mailroom.apiKey';

export interface Session {
  client: MailroomClient;
  signOut(): void;
}

const SessionContext = createContext<Session | null>(null);

/** The signed-in session; pages are only rendered inside one. */
export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside a signed-in page');
  return session;
}

export const useClient = (): MailroomClient => useSession().client;

/** Checks a key by calling an operation only full access keys may call: the dashboard needs one. */
export async function checkKey(apiKey: string): Promise<MailroomError | null> {
  const { error } = await connect(apiKey).GET('/api-keys', { params: { query: { limit: 1 } } });
  if (error?.name === 'restricted_api_key') {
    return { ...error, message: 'This key may only send emails. Sign in with a full access key to use the dashboard.' };
  }
  return error ?? null;
}

/** Why the last session ended other than by signing out, for the sign-in page to say. */
export const KEY_REFUSED = 'The key you signed in with is no longer valid (it may have been revoked). Sign in with another full access key.';

export function SessionProvider({
  signIn,
  children,
}: {
  signIn: (onSignedIn: (key: string) => void, ended: string | null) => ComponentChildren;
  children: ComponentChildren;
}) {
  const [ended, setEnded] = useState<string | null>(null);
  const [session, setSession] = useState<Session | null>(() => {
    const key = sessionStorage.getItem(STORAGE_KEY);
    return key ? open(key) : null;
  });

  function open(apiKey: string): Session {
    const end = (why: string | null) => {
      sessionStorage.removeItem(STORAGE_KEY);
      setEnded(why);
      setSession(null);
    };
    // A key refused mid-session (revoked elsewhere) signs out, saying why, rather than leave every page
    // failing behind a session that looks signed in.
    return { client: connect(apiKey, () => end(KEY_REFUSED)), signOut: () => end(null) };
  }

  if (!session) {
    return signIn((apiKey) => {
      sessionStorage.setItem(STORAGE_KEY, apiKey);
      // The sign-in form goes: the focus goes to the heading of the page that takes its place.
      arriveHere();
      setEnded(null);
      setSession(open(apiKey));
    }, ended);
  }
  return <SessionContext.Provider value={session}>{children}</SessionContext.Provider>;
}
