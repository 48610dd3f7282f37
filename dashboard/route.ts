import type { JSX } from 'preact';

/** A page and the path it answers: `/contacts/:id` passes `{ id }` to the page. */
export interface Route {
  path: string;
  page: (params: Record<string, string>) => JSX.Element;
}
