// Not built yet: the page says so rather than pretending.
import type { Route } from '../route.ts';
import { PageHeading } from '../ui.tsx';

export const templateRoutes: Route[] = [{ path: '/templates', page: () => <><PageHeading title="Templates" /><p>This page is not built yet.</p></> }];
