import { existsSync, readFileSync } from 'node:fs';
import { chromium, Browser, Page } from 'playwright-core';

/** Debian's Chromium, or ALCARTA_TEST_CHROMIUM. */
export const CHROMIUM = process.env.ALCARTA_TEST_CHROMIUM ?? '/usr/bin/chromium';
const SKIP_VARIABLE = 'ALCARTA_TEST_WITHOUT_CHROMIUM';

/**
 * A headless Chromium through playwright-core (no downloaded browsers). Without Chromium installed
 * this fails, unless ALCARTA_TEST_WITHOUT_CHROMIUM=1 lets the browser tests skip: then it returns
 * the reason to skip instead.
 */
export async function launchChromium(args: string[] = []): Promise<{ browser: Browser } | { skip: string }> {
  if (!existsSync(CHROMIUM)) {
    const message = `Chromium is not installed at ${CHROMIUM} (apt-get install -y chromium)`;
    if (process.env[SKIP_VARIABLE] !== '1') throw new Error(`${message}; set ${SKIP_VARIABLE}=1 to skip`);
    return { skip: message };
  }
  return { browser: await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', ...args] }) };
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
