// Not built yet: the page says so rather than pretending.
import type { Route } from '../route.ts';
import { PageHeading } from '../ui.tsx';

export const webhookRoutes: Route[] = [{ path: '/webhooks', page: () => <><PageHeading title="Webhooks" /><p>This page is not built yet.</p></> }];
