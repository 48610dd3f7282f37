// The dashboard's sections, and signing out. Beside the page on a wide screen; on a phone, a bar above
// the page whose Menu button opens them, so that the page keeps the screen's width and nearly all its
// height (style.css).
import { useId, useRef, useState } from 'preact/hooks';
import { leavingAllowed, Link } from './router.tsx';
import { useSession } from './session.tsx';

const SECTIONS = [
  ['/contacts', 'Contacts'],
  ['/segments', 'Segments'],
  ['/topics', 'Topics'],
  ['/broadcasts', 'Broadcasts'],
  ['/emails', 'Emails'],
  ['/templates', 'Templates'],
  ['/domains', 'Domains'],
  ['/webhooks', 'Webhooks'],
  ['/suppressions', 'Suppressions'],
  ['/api-keys', 'API keys'],
] as const;

export function Sections({ path }: { path: string }) {
  const { signOut } = useSession();
  const [open, setOpen] = useState(false);
  const menu = useRef<HTMLButtonElement>(null);
  const items = useId();
  return (
    <nav
      class={open ? 'sections open' : 'sections'}
      aria-label="Sections"
      onKeyDown={(event) => {
        if (event.key !== 'Escape' || !open) return;
        setOpen(false);
        menu.current?.focus();
      }}
    >
      <p class="brand">Mailroom</p>
      <button type="button" class="menu" ref={menu} aria-expanded={open} aria-controls={items} onClick={() => setOpen(!open)}>
        Menu
      </button>
      {/* A section chosen closes the menu: the page it opens is what the person came for. */}
      <div class="menu-items" id={items} onClick={(event) => (event.target as Element).closest('a') && setOpen(false)}>
        <ul>
          {SECTIONS.map(([to, label]) => (
            <li key={to}>
              <Link to={to} current={path === to || path.startsWith(`${to}/`)}>
                {label}
              </Link>
            </li>
          ))}
        </ul>
        <button type="button" class="sign-out" onClick={() => leavingAllowed() && signOut()}>
          Sign out
        </button>
      </div>
    </nav>
  );
}
