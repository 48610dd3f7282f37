// Not built yet: the page says so rather than pretending.
import type { Route } from '../route.ts';
import { PageHeading } from '../ui.tsx';

export const broadcastRoutes: Route[] = [{ path: '/broadcasts', page: () => <><PageHeading title="Broadcasts" /><p>This page is not built yet.</p></> }];
