// Not built yet: the page says so rather than pretending.
import type { Route } from '../route.ts';
import { PageHeading } from '../ui.tsx';

export const topicRoutes: Route[] = [{ path: '/topics', page: () => <><PageHeading title="Topics" /><p>This page is not built yet.</p></> }];
