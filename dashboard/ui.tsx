// The pieces every page is made of. Each form control has a visible label naming its field, actions
// are buttons with words, and an API error is shown next to its form. Lists are ./list.tsx's, and
// reading from the API ./load.ts's.
import { createContext, type ComponentChildren } from 'preact';
import { useContext, useEffect, useId, useRef, useState } from 'preact/hooks';
import type { MailroomError } from './api.ts';
import { Link, takeArrival } from './router.tsx';

/** The input attributes pages use; preact's own attribute types do not survive a spread through Omit. */
interface InputProps {
  type?: 'text' | 'email' | 'password' | 'url' | 'search' | 'number' | 'datetime-local';
  required?: boolean;
  placeholder?: string;
  autoComplete?: string;
  name?: string;
  disabled?: boolean;
  readOnly?: boolean;
}

/**
 * Whether the form around a control is being submitted. Its controls then take no input (read-only,
 * keeping the focus), so that nothing typed meanwhile is lost when the answer clears the form or
 * shows what was saved.
 */
const Submitting = createContext(false);

/** A labelled text input; `onValue` gets the new text on every keystroke. A hint is described, not part of the label. */
export function TextField({ label, value, onValue, hint, ...input }: { label: string; value: string; onValue: (value: string) => void; hint?: string } & InputProps) {
  const id = useId();
  const submitting = useContext(Submitting);
  return (
    <div class="field">
      <label class="field-label" for={id}>
        {label}
      </label>
      <input {...input} readOnly={input.readOnly || submitting} id={id} value={value} onInput={(event) => onValue(event.currentTarget.value)} aria-describedby={hint ? `${id}-hint` : undefined} />
      {hint && (
        <span class="field-hint" id={`${id}-hint`}>
          {hint}
        </span>
      )}
    </div>
  );
}

export function TextArea({ label, value, onValue, rows = 8, hint }: { label: string; value: string; onValue: (value: string) => void; rows?: number; hint?: string }) {
  const id = useId();
  const submitting = useContext(Submitting);
  return (
    <div class="field">
      <label class="field-label" for={id}>
        {label}
      </label>
      <textarea id={id} rows={rows} readOnly={submitting} value={value} onInput={(event) => onValue(event.currentTarget.value)} aria-describedby={hint ? `${id}-hint` : undefined} />
      {hint && (
        <span class="field-hint" id={`${id}-hint`}>
          {hint}
        </span>
      )}
    </div>
  );
}

export function Select({ label, value, onValue, options, required }: { label: string; value: string; onValue: (value: string) => void; options: { value: string; label: string }[]; required?: boolean }) {
  const id = useId();
  const submitting = useContext(Submitting);
  return (
    <div class="field">
      <label class="field-label" for={id}>
        {label}
      </label>
      <select
        id={id}
        value={value}
        required={required}
        aria-readonly={submitting || undefined}
        onChange={(event) => {
          // A select has no read-only state: the choice made meanwhile is put back.
          if (submitting) event.currentTarget.value = value;
          else onValue(event.currentTarget.value);
        }}
      >
        {options.map((option) => (
          <option key={option.value} value={option.value}>
            {option.label}
          </option>
        ))}
      </select>
    </div>
  );
}

export function Checkbox({ label, checked, onValue }: { label: string; checked: boolean; onValue: (checked: boolean) => void }) {
  const id = useId();
  const submitting = useContext(Submitting);
  return (
    <div class="field field-inline">
      <input
        id={id}
        type="checkbox"
        checked={checked}
        aria-readonly={submitting || undefined}
        onClick={(event) => submitting && event.preventDefault()}
        onChange={(event) => onValue(event.currentTarget.checked)}
      />
      <label class="field-label" for={id}>
        {label}
      </label>
    </div>
  );
}

/**
 * An action that runs one at a time: called again while it runs (a double click, Enter pressed twice),
 * it does nothing, so that it makes one request, one contact, one key. `busy` while it runs.
 */
function useOneAtATime(action: (() => unknown) | undefined): [busy: boolean, run: () => Promise<void>] {
  const running = useRef(false);
  const [busy, setBusy] = useState(false);
  const run = async () => {
    if (!action || running.current) return;
    running.current = true;
    setBusy(true);
    try {
      await action();
    } finally {
      running.current = false;
      setBusy(false);
    }
  };
  return [busy, run];
}

/**
 * A form that never leaves the page, whose submission runs one at a time. Without `onSubmit` (a filter,
 * whose fields act as they change), submitting does nothing.
 */
export function Form({ onSubmit, children, ...rest }: { onSubmit?: () => unknown; children: ComponentChildren; class?: string; role?: 'search'; 'aria-label'?: string; 'aria-labelledby'?: string }) {
  const [busy, run] = useOneAtATime(onSubmit);
  return (
    <form
      {...rest}
      aria-busy={busy}
      onSubmit={(event) => {
        event.preventDefault();
        void run();
      }}
    >
      <Submitting.Provider value={busy}>{children}</Submitting.Provider>
    </form>
  );
}

/** A button that calls the API, its action run one at a time as a Form's: "Rotate secret" rotates once, however clicked. */
export function ActionButton({ onClick, children, ...rest }: { onClick: () => unknown; children: ComponentChildren; class?: string; disabled?: boolean; 'aria-label'?: string }) {
  const [busy, run] = useOneAtATime(onClick);
  return (
    <button type="button" {...rest} aria-busy={busy} onClick={() => void run()}>
      {children}
    </button>
  );
}

/** An error from the API, with its message as the server wrote it; announced to screen readers. */
export function ErrorNote({ error }: { error: MailroomError | Error | null | undefined }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error.message}
    </p>
  );
}

/**
 * An email's HTML in a frame that runs none of it (`sandbox=""`, and the dashboard's CSP besides), whose
 * links do nothing: followed, one replaced the preview with the browser's "blocked" page. (Appended, so
 * that a doctype still comes first.)
 */
export function MessageFrame({ title, html }: { title: string; html: string }) {
  return <iframe class="message" title={title} sandbox="" srcdoc={`${html}<style>a{pointer-events:none}</style>`} />;
}

/** Shown while something loads. */
export function Loading({ what }: { what: string }) {
  return (
    <p class="loading" role="status" aria-live="polite">
      <progress aria-label={`Loading ${what}`} /> Loading {what}…
    </p>
  );
}

/** A secret the server shows only once (a key's token, a webhook's signing secret). */
export function ShownOnce({ label, value }: { label: string; value: string }) {
  return (
    <div class="shown-once" role="status">
      <TextField label={label} value={value} onValue={() => {}} readOnly />
      <p class="field-hint">Copy it now: it will not be shown again.</p>
    </div>
  );
}

/**
 * Keeps the focus on the page. When the element that has it is taken out (its row deleted, its form
 * replaced by what it saved or sent), the browser leaves the focus on <body>, and a keyboard at the top
 * of the page: the page's heading takes it instead, once there is one.
 */
export function useFocusKept(): void {
  useEffect(() => {
    let focused: Element | null = null;
    const noteFocus = (event: FocusEvent) => void (focused = event.target as Element);
    const observer = new MutationObserver(() => {
      if (!focused || focused.isConnected || (document.activeElement && document.activeElement !== document.body)) return;
      const heading = document.querySelector<HTMLElement>('main h1');
      if (!heading) return;
      focused = null;
      heading.focus();
    });
    document.addEventListener('focusin', noteFocus);
    observer.observe(document.body, { childList: true, subtree: true });
    return () => {
      document.removeEventListener('focusin', noteFocus);
      observer.disconnect();
    };
  }, []);
}

export function PageHeading({ title, children }: { title: string; children?: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · Mailroom`;
  }, [title]);
  const heading = useRef<HTMLHeadingElement>(null);
  // Taken as the heading first renders: effects run after the browser paints, when it has been cleared.
  const [arrived] = useState(takeArrival);
  useEffect(() => {
    if (arrived) heading.current?.focus();
  }, []);
  return (
    <header class="page-heading">
      <h1 tabIndex={-1} ref={heading}>
        {title}
      </h1>
      {children && <div class="actions">{children}</div>}
    </header>
  );
}

/** A page whose subject could not be read (an unknown id, say): its heading, the way back to its list, and why. */
export function Unreadable({ title, back, error }: { title: string; back: [to: string, label: string]; error: MailroomError }) {
  return (
    <>
      <PageHeading title={title} />
      <p>
        <Link to={back[0]}>{back[1]}</Link>
      </p>
      <ErrorNote error={error} />
    </>
  );
}

export function When({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span class="muted">—</span>;
  return <time dateTime={iso}>{new Date(iso).toLocaleString()}</time>;
}

export { Link };
