// The dashboard in Debian's Chromium, driven by playwright-core: the browser, and signing in as a user
// would, by typing the key into the sign-in form.
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Whether the browser suites can run; under CI=true a missing Chromium fails them instead of skipping. */
export const chromiumPresent = existsSync(CHROMIUM);
if (!chromiumPresent) {
  if (process.env.CI === 'true') throw new Error(`no Chromium at ${CHROMIUM}, and CI=true does not allow skipping browser tests (apt-get install chromium)`);
  console.warn(`no Chromium at ${CHROMIUM}: skipping the browser tests (apt-get install chromium; CI=true makes this a failure)`);
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
}

/** Opens `path` under /dashboard in a new page of its own context, signs in with `apiKey`, and waits for the page's heading. */
export async function openSignedIn(browser: Browser, baseUrl: string, apiKey: string, path = '/contacts'): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const failures: string[] = [];
  page.on('pageerror', (error) => failures.push(error.message));
  await page.goto(`${baseUrl}/dashboard${path}`);
  await page.getByLabel('API key').fill(apiKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  if (failures.length > 0) throw new Error(`the dashboard threw: ${failures.join('; ')}`);
  return page;
}
