// The dashboard's frame: sign-in until there is a key, then the navigation and the page the URL names.
import { useEffect, useState } from 'preact/hooks';
import { apiKeyRoutes } from './pages/apiKeys.tsx';
import { broadcastRoutes } from './pages/broadcasts.tsx';
import { contactRoutes } from './pages/contacts.tsx';
import { domainRoutes } from './pages/domains.tsx';
import { emailRoutes } from './pages/emails.tsx';
import { segmentRoutes } from './pages/segments.tsx';
import { suppressionRoutes } from './pages/suppressions.tsx';
import { templateRoutes } from './pages/templates.tsx';
import { topicRoutes } from './pages/topics.tsx';
import { webhookRoutes } from './pages/webhooks.tsx';
import type { Route } from './route.ts';
import { Link, match, navigate, useLocation } from './router.tsx';
import { Sections } from './sections.tsx';
import { checkKey, SessionProvider } from './session.tsx';
import { ErrorNote, PageHeading, TextField, useFocusKept } from './ui.tsx';
import type { MailroomError } from './api.ts';

const ROUTES: Route[] = [
  ...contactRoutes,
  ...segmentRoutes,
  ...topicRoutes,
  ...broadcastRoutes,
  ...emailRoutes,
  ...templateRoutes,
  ...domainRoutes,
  ...webhookRoutes,
  ...suppressionRoutes,
  ...apiKeyRoutes,
];

export function App() {
  return (
    <SessionProvider signIn={(onSignedIn, ended) => <SignIn onSignedIn={onSignedIn} ended={ended} />}>
      <Frame />
    </SessionProvider>
  );
}

function Frame() {
  useFocusKept();
  const { path: at } = useLocation();
  // The dashboard's root is the contacts page; its URL says so once the page has rendered.
  const path = at === '/' ? '/contacts' : at;
  useEffect(() => {
    if (at === '/') navigate('/contacts', { replace: true });
  }, [at]);
  const found = ROUTES.map((route) => ({ route, params: match(route.path, path) })).find(({ params }) => params);
  return (
    <div class="frame">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Sections path={path} />
      <main id="main" tabIndex={-1}>
        {found ? <found.route.page {...found.params!} key={path} /> : <NotFound />}
      </main>
    </div>
  );
}

function NotFound() {
  return (
    <>
      <PageHeading title="Page not found" />
      <p>
        There is no dashboard page here. <Link to="/contacts">Go to contacts</Link>.
      </p>
    </>
  );
}

function SignIn({ onSignedIn, ended }: { onSignedIn: (key: string) => void; ended: string | null }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<MailroomError | Error | null>(ended ? new Error(ended) : null);
  const [checking, setChecking] = useState(false);
  return (
    <main id="main" class="sign-in">
      <PageHeading title="Sign in" />
      <p>Sign in with a full access API key. It is kept in this tab only, and forgotten when you sign out or close the tab.</p>
      <form
        onSubmit={async (event) => {
          event.preventDefault();
          // Spaces alone pass `required`; the client would refuse them with words for developers. A key
          // copied with its header's `Bearer ` is taken without it; one with other than printable ASCII
          // cannot go in a header at all (the browser's own error says so in its words, not a person's).
          const given = key.trim().replace(/^Bearer\s+/i, '');
          if (!given) return setError({ statusCode: 401, name: 'missing_api_key', message: 'Enter an API key: it starts with re_.' });
          if (!/^[\x21-\x7e]+$/.test(given)) return setError({ statusCode: 403, name: 'invalid_api_key', message: 'That is not an API key: a key is re_ followed by letters and digits.' });
          setChecking(true);
          const refused = await checkKey(given).catch((failure: Error) => ({ statusCode: 500, name: 'internal_server_error' as const, message: failure.message }));
          setChecking(false);
          if (refused) setError(refused);
          else onSignedIn(given);
        }}
      >
        <TextField label="API key" value={key} onValue={setKey} type="password" autoComplete="off" required placeholder="re_…" />
        <ErrorNote error={error} />
        <button type="submit" disabled={checking}>
          {checking ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
