import { readFileSync } from 'node:fs';
import { chromium, Browser, BrowserContext, Page } from 'playwright-core';
import { recordConsoleCookies } from './console';
import { chromiumPath, requireSystemPackage } from './system-packages';
import { recordingSecrets, recordSecret } from './test-logs';

/**
 * A headless Chromium through playwright-core (no downloaded browsers). Without Chromium installed
 * it returns the reason for the browser tests to skip instead (see requireSystemPackage: under CI
 * a missing Chromium throws).
 */
export async function launchChromium(args: string[] = []): Promise<{ browser: Browser } | { skip: string }> {
  const skip = requireSystemPackage('chromium');
  if (skip) return { skip };
  const browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox', ...args] });
  if (recordingSecrets) recordSecretsOfContexts(browser);
  return { browser };
}

/**
 * Records the secrets a browser comes to hold (console cookies, approval-link tokens it opens, the
 * code and state of OpenID Connect callbacks), so that the run's log scan looks for them.
 */
function recordSecretsOfContexts(browser: Browser): void {
  const newContext = browser.newContext.bind(browser);
  browser.newContext = async (...options: Parameters<Browser['newContext']>): Promise<BrowserContext> => {
    const context = await newContext(...options);
    context.on('request', (request) => {
      const url = new URL(request.url());
      const link = /^\/console\/links\/([^/]+)$/.exec(url.pathname)?.[1];
      if (link) recordSecret('approval-link token (browser)', link);
      if (url.pathname === '/console/sign-in/callback') {
        recordSecret('OpenID Connect code', url.searchParams.get('code'));
        recordSecret('OpenID Connect state', url.searchParams.get('state'));
      }
    });
    context.on('response', (response) => {
      response.headerValues('set-cookie').then(
        (values) => recordConsoleCookies(values.flatMap((v) => v.split('\n'))),
        () => undefined, // the page went away first
      );
    });
    return context;
  };
}

const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/** The serious and critical axe-core violations of the page as it is now, one line each. */
export async function axeViolations(page: Page): Promise<string[]> {
  await page.addScriptTag({ content: AXE_SOURCE });
  return page.evaluate(async () => {
    const axe = (globalThis as any).axe;
    const result = await axe.run({ exclude: [] }, { iframes: false });
    return result.violations
      .filter((v: any) => v.impact === 'serious' || v.impact === 'critical')
      .map((v: any) => `${v.id}: ${v.nodes.map((n: any) => n.target.join(' ')).join(', ')}`);
  });
}
