// A list page's list: what the API lists, as a table of its columns, with the states around it (loading,
// the error that kept it from being read or a change to a row from being made, nothing to list yet),
// each row's actions (deleting one asks first), and for a long list its pages, kept in the URL. On a
// phone each row is a card of its own (style.css), the first column its title.
import { Fragment, type ComponentChildren } from 'preact';
import type { MailroomError } from './api.ts';
import { useAction, type Loaded } from './load.ts';
import { Link, navigate, useLocation } from './router.tsx';
import { ActionButton, ErrorNote, Loading } from './ui.tsx';

export interface Column<T> {
  heading: string;
  cell: (item: T) => ComponentChildren;
}

/** A change made from a row: the API's call, its error shown above the list, the list read again after it. */
export type RowAction = (call: () => Promise<{ error?: MailroomError }>) => Promise<boolean>;

/** Deleting a row, after asking. */
export interface Removal<T> {
  /** The button's word: Delete, Remove, Revoke. */
  verb: string;
  /** What the row is, after the verb, for a screen reader's name of the button: "Delete Readers". */
  name: (item: T) => string;
  /** The question asked first; the row stays unless it is answered yes. */
  confirm: (item: T) => string;
  call: (item: T) => Promise<{ error?: MailroomError }>;
}

export function List<T extends { id: string }>({
  what,
  loaded,
  columns,
  empty,
  paged,
  actions,
  remove,
  error,
}: {
  /** What the list holds, in words: "Loading segments…". */
  what: string;
  loaded: Loaded<{ data: T[]; has_more?: boolean } | undefined>;
  columns: Column<T>[];
  /** Said when there is nothing to list. */
  empty: string;
  /** A list read a page at a time: its path, and the query its pages keep (a filter). */
  paged?: { path: string; extra?: Record<string, string> };
  /** A row's actions besides deleting it. */
  actions?: (item: T, run: RowAction) => ComponentChildren;
  remove?: Removal<T>;
  /** An error of the page's own, shown where the list's are. */
  error?: MailroomError | null;
}) {
  const [actionError, run] = useAction(loaded.reload);
  const items = loaded.data?.data;
  const hasActions = Boolean(actions || remove);
  return (
    <>
      <ErrorNote error={loaded.error ?? error ?? actionError} />
      {paged && <FirstPageLink failed={Boolean(loaded.error) || items?.length === 0} path={paged.path} extra={paged.extra} />}
      {/* A paged list shows the page it has until the next one is read: that one is said to load. */}
      {loaded.loading && (paged || !items) && <Loading what={what} />}
      {items && items.length > 0 && (
        <div class="list-scroll">
          <table class="list">
            <thead>
              <tr>
                {columns.map((column) => (
                  <th scope="col" key={column.heading}>
                    {column.heading}
                  </th>
                ))}
                {hasActions && (
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {items.map((item) => (
                <tr key={item.id}>
                  {columns.map((column) => (
                    <td key={column.heading} data-label={column.heading}>
                      {column.cell(item)}
                    </td>
                  ))}
                  {hasActions && (
                    <td class="row-actions">
                      <div class="actions">
                        {actions?.(item, run)}
                        {remove && (
                          <ActionButton class="danger" onClick={() => confirm(remove.confirm(item)) && run(() => remove.call(item))}>
                            {remove.verb}
                            <span class="visually-hidden"> {remove.name(item)}</span>
                          </ActionButton>
                        )}
                      </div>
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {items?.length === 0 && <p>{empty}</p>}
      {paged && items && items.length > 0 && <Pager items={items} hasMore={loaded.data!.has_more ?? false} path={paged.path} extra={paged.extra} />}
    </>
  );
}

/**
 * An email address, kept whole: a table's column takes its width, and on a phone's card it moves to a
 * line of its own rather than break at a hyphen or at any letter. Only an address longer than the
 * whole line breaks. As a link's text, `to` names the page it opens.
 */
export function Address({ email, to }: { email: string; to?: string }) {
  return to ? (
    <Link to={to} class="address">
      {email}
    </Link>
  ) : (
    <span class="address">{email}</span>
  );
}

/** Addresses, each kept whole, the list broken between them. */
export function Addresses({ emails }: { emails: string[] }) {
  return (
    <>
      {emails.map((email, at) => (
        <Fragment key={at}>
          {at > 0 && ', '}
          <Address email={email} />
        </Fragment>
      ))}
    </>
  );
}

/**
 * Cursor paging kept in the URL (`?after=…` or `?before=…`), so the browser's back button and a
 * reload keep the page. `has_more` tells whether there is more in the direction of travel.
 */
export function useCursor(): { after?: string; before?: string } {
  const { query } = useLocation();
  const after = query.get('after') ?? undefined;
  const before = query.get('before') ?? undefined;
  return { ...(after && { after }), ...(before && { before }) };
}

/**
 * Where a list page named by a cursor could not be read, or has nothing (its item deleted since, say):
 * the way back to the list's first page, which the pager, shown only with items, does not give.
 */
function FirstPageLink({ failed, path, extra = {} }: { failed: boolean; path: string; extra?: Record<string, string> }) {
  const cursor = useCursor();
  if (!failed || !(cursor.after || cursor.before)) return null;
  const query = new URLSearchParams(extra).toString();
  return (
    <p>
      <Link to={query ? `${path}?${query}` : path}>Back to the first page</Link>
    </p>
  );
}

function Pager({ items, hasMore, path, extra = {} }: { items: { id: string }[]; hasMore: boolean; path: string; extra?: Record<string, string> }) {
  const cursor = useCursor();
  const backwards = Boolean(cursor.before);
  const hasNext = backwards ? true : hasMore;
  const hasPrevious = backwards ? hasMore : Boolean(cursor.after);
  const to = (key: 'after' | 'before', id: string) => `${path}?${new URLSearchParams({ ...extra, [key]: id })}`;
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" disabled={!hasPrevious} onClick={() => navigate(to('before', items[0]!.id))}>
        Previous page
      </button>
      <button type="button" disabled={!hasNext} onClick={() => navigate(to('after', items.at(-1)!.id))}>
        Next page
      </button>
    </nav>
  );
}
