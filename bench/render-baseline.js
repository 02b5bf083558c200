// The render benchmark's baseline, run as its own process (bench/render.js measures it and the
// browser it starts as one tree): Crawlee's PlaywrightCrawler on the script site's app section.
// `node bench/render-baseline.js JOB.json`, where the job names the start URL, the concurrency,
// Chromium's path, how requests are blocked and the JSONL file for the items. Prints
// {"pages":…,"items":…,"failed":…} as the last line of stdout.
//
// A list page's links and an item page's fields are written by the page's script from a JSON API:
// every page is awaited until `#app[data-ready]` (set by the script once the content is in), then
// read. Images, fonts and media are not loaded: by URL through Crawlee's blockRequests (Chromium's
// CDP Network.setBlockedURLs: no round trip to Node per request), or with `block: "route"` by
// Playwright resource type in a page.route handler (every request goes through Node).
import { createWriteStream, readFileSync } from 'node:fs';
import { once } from 'node:events';

const job = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { PlaywrightCrawler, Configuration, log, LogLevel } = await import('@crawlee/playwright');
const { chromium } = await import('playwright-core');
log.setLevel(LogLevel.WARNING);

/** Crawlee's blockRequests patterns (URL substrings) for images, fonts and media. */
const BLOCKED_URL_PATTERNS = ['.png', '.jpg', '.jpeg', '.gif', '.svg', '.webp', '.avif', '.ico', '.bmp', '.woff', '.woff2', '.ttf', '.otf', '.eot', '.mp4', '.webm', '.ogg', '.mp3', '.wav', '.m4a'];
const BLOCKED_TYPES = new Set(['image', 'font', 'media']);

const out = createWriteStream(job.out);
let pages = 0;
let items = 0;
let failed = 0;
const config = new Configuration({ persistStorage: false, purgeOnStart: true });
const crawler = new PlaywrightCrawler(
  {
    minConcurrency: job.concurrency,
    maxConcurrency: job.concurrency,
    maxRequestRetries: job.retries ?? 2,
    maxRequestsPerMinute: Number.MAX_SAFE_INTEGER,
    navigationTimeoutSecs: 30,
    requestHandlerTimeoutSecs: 60,
    headless: true,
    launchContext: {
      launcher: chromium,
      launchOptions: { executablePath: job.executablePath, headless: true },
    },
    browserPoolOptions: {
      retireBrowserAfterPageCount: job.retireBrowserAfterPageCount ?? 100,
      useFingerprints: job.fingerprints ?? true,
    },
    preNavigationHooks: [
      async ({ page, blockRequests }) => {
        if (job.block === 'route') {
          await page.route('**/*', (route) => (BLOCKED_TYPES.has(route.request().resourceType()) ? route.abort() : route.continue()));
        } else if (job.block !== 'none') {
          await blockRequests({ urlPatterns: BLOCKED_URL_PATTERNS });
        }
      },
    ],
    async requestHandler({ page, request, enqueueLinks }) {
      await page.waitForSelector('#app[data-ready]', { state: 'attached', timeout: 30_000 });
      pages++;
      if (/\/app\/item\/\d+\.html$/.test(request.loadedUrl ?? request.url)) {
        const item = await page.evaluate(() => {
          const text = (css) => document.querySelector(css)?.textContent?.trim() ?? null;
          return { title: text('h1.title'), price: text('p.price'), sku: text('p.sku') };
        });
        const price = item.price?.match(/([0-9.]+)/)?.[1];
        if (item.title && price && item.sku) {
          items++;
          out.write(`${JSON.stringify({ type: 'product', url: request.loadedUrl ?? request.url, title: item.title, price: Number(price), sku: item.sku })}\n`);
        }
        return;
      }
      await enqueueLinks({ selector: 'a.product, a.next', strategy: 'same-origin' });
    },
    async failedRequestHandler({ request }, error) {
      failed++;
      process.stderr.write(`render-baseline: ${request.url} failed: ${error.message.split('\n')[0]}\n`);
    },
  },
  config,
);
await crawler.run([job.startUrl]);
out.end();
await once(out, 'finish');
process.stdout.write(`${JSON.stringify({ pages, items, failed })}\n`);
process.exit(0);
