import { type Logger, createLogger, validateSpider } from '@crawlfleet/core';
import { BrowserPool, PageRenderer, type RenderedPageStats } from '@crawlfleet/render';
import { startHostileSite } from '../fixtures/hostile-pages.mjs';

/**
 * Hostile pages against the renderer itself (issue #28, section B): a real Chromium, a real local
 * site, the renderer's own loader as the render stage calls it.
 */
type Site = Awaited<ReturnType<typeof startHostileSite>>;

const log: Logger = createLogger({ level: 'silent' });

function spiderFor(site: Site, extra: Record<string, unknown> = {}) {
  return validateSpider({ name: 'hostile', startUrls: [`${site.url}/page`], allowedAddresses: ['127.0.0.1'], render: 'always', ...extra });
}

/** What a load gave: its result or its error's code, and the page's stats. */
async function load(renderer: PageRenderer, spider: ReturnType<typeof spiderFor>, url: string, stats: RenderedPageStats[]) {
  const before = stats.length;
  try {
    const page = await renderer.loaderFor(spider, 'crawl-1')(url, { userAgent: 'Mozilla/5.0 (X11; Linux x86_64) Chrome/130.0 Safari/537.36' });
    return { page, stats: stats[before] };
  } catch (err) {
    return { code: (err as { code?: string }).code ?? 'no code', message: (err as Error).message, stats: stats[before] };
  }
}

describe('a page cannot hang or escape the renderer', () => {
  let site: Site;
  let pool: BrowserPool;
  let renderer: PageRenderer;
  const stats: RenderedPageStats[] = [];

  beforeAll(async () => {
    site = await startHostileSite();
    pool = new BrowserPool({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', retireAfterPages: 1000, log });
    renderer = new PageRenderer(pool, new Map(), log, (s) => stats.push(s));
  });
  afterAll(async () => {
    await renderer.close();
    await pool.close();
    await site.close();
  });

  test('a DOM over limits.maxResponseBytes is refused inside the page (ERR_RESPONSE_TOO_LARGE), none of it copied here; one under the cap is taken whole', async () => {
    const spider = spiderFor(site, { limits: { maxResponseBytes: 1_000_000 } });
    const huge = await load(renderer, spider, `${site.url}/huge?chars=3000000`, stats);
    expect(huge.code).toBe('ERR_RESPONSE_TOO_LARGE');
    expect(huge.stats?.domChars).toBe(0);
    const fits = await load(renderer, spider, `${site.url}/huge?chars=500000`, stats);
    expect(fits.page?.body.length).toBeGreaterThan(500_000);
    expect(fits.stats?.domChars).toBe(fits.page?.body.length);
  }, 60_000);
});
