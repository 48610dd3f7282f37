// The dashboard: its bundle's size, raw and gzipped, and the time to interactive of its contacts page
// in Chromium for a signed-in tab: from navigation start to the first page of contacts rendered with
// its "Next page" button enabled, measured in the page itself (median of 5 fresh loads), beside the
// browser's own DOMContentLoaded.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { launchChromium } from '../support/dashboard.ts';

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

export async function benchDashboard(root: string, url: string, apiKey: string, contacts: number): Promise<void> {
  console.log('Dashboard:');
  for (const file of ['dashboard.js', 'dashboard.css']) {
    const body = readFileSync(join(root, 'build/dashboard', file));
    console.log(`  ${file.padEnd(14)} ${(body.length / 1024).toFixed(1)} KB, ${(gzipSync(body).length / 1024).toFixed(1)} KB gzipped`);
  }
  const browser = await launchChromium();
  try {
    const ready: number[] = [];
    const loaded: number[] = [];
    for (let round = 0; round < 6; round++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      await context.addInitScript((key: string) => {
        sessionStorage.setItem('mailroom.apiKey', key);
        // Notes the first moment the page is usable: rows shown and the next page one click away.
        new MutationObserver((_changes, observer) => {
          const next = [...document.querySelectorAll('button')].find((b) => b.textContent === 'Next page');
          if (document.querySelector('tbody tr') && next && !next.disabled) {
            (window as unknown as { interactiveAt: number }).interactiveAt = performance.now();
            observer.disconnect();
          }
        }).observe(document, { childList: true, subtree: true, attributes: true });
      }, apiKey);
      const page = await context.newPage();
      await page.goto(`${url}/dashboard/contacts`);
      await page.waitForFunction(() => (window as unknown as { interactiveAt?: number }).interactiveAt !== undefined, undefined, { timeout: 30_000 });
      const [interactive, domContentLoaded] = await page.evaluate(() => [
        (window as unknown as { interactiveAt: number }).interactiveAt,
        (performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming).domContentLoadedEventEnd,
      ]);
      await context.close();
      // The first load warms the server's caches and compiled checks; it is not counted.
      if (round === 0) continue;
      ready.push(interactive!);
      loaded.push(domContentLoaded!);
    }
    console.log(`  contacts page with ${contacts.toLocaleString('en')} contacts: interactive after ${median(ready).toFixed(0)} ms (median of ${ready.length}; runs ${ready.map((ms) => ms.toFixed(0)).join(', ')}), DOMContentLoaded ${median(loaded).toFixed(0)} ms\n`);
  } finally {
    await browser.close();
  }
}
