// Not built yet: the page says so rather than pretending.
import type { Route } from '../route.ts';
import { PageHeading } from '../ui.tsx';

export const segmentRoutes: Route[] = [{ path: '/segments', page: () => <><PageHeading title="Segments" /><p>This page is not built yet.</p></> }];
