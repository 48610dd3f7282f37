// Not built yet: the page says so rather than pretending.
import type { Route } from '../route.ts';
import { PageHeading } from '../ui.tsx';

export const emailRoutes: Route[] = [{ path: '/emails', page: () => <><PageHeading title="Emails" /><p>This page is not built yet.</p></> }];
