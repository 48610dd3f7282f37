// Not built yet: the page says so rather than pretending.
import type { Route } from '../route.ts';
import { PageHeading } from '../ui.tsx';

export const apiKeyRoutes: Route[] = [{ path: '/api-keys', page: () => <><PageHeading title="API keys" /><p>This page is not built yet.</p></> }];
