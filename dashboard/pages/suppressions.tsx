// Not built yet: the page says so rather than pretending.
import type { Route } from '../route.ts';
import { PageHeading } from '../ui.tsx';

export const suppressionRoutes: Route[] = [{ path: '/suppressions', page: () => <><PageHeading title="Suppressions" /><p>This page is not built yet.</p></> }];
