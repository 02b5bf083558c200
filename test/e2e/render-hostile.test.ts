import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { type Logger, createLogger, validateSpider } from '@crawlfleet/core';
import { BrowserPool, PageRenderer, type RenderLoadOptions, type RenderedPageStats, scratchBase } from '@crawlfleet/render';
import { startHostileSite } from '../fixtures/hostile-pages.mjs';
import { waitFor } from '../helpers/cli.js';

/**
 * Hostile pages against the renderer itself (issue #28, section B): a real Chromium, a real local
 * site, the renderer's own loader as the render stage calls it.
 */
type Site = Awaited<ReturnType<typeof startHostileSite>>;

const log: Logger = createLogger({ level: 'silent' });

function spiderFor(site: Site, extra: Record<string, unknown> = {}) {
  return validateSpider({ name: 'hostile', startUrls: [`${site.url}/page`], allowedAddresses: ['127.0.0.1'], render: 'always', ...extra });
}

/** Chromium processes started by this test process (its descendants): other engineers' browsers are not counted. */
function ourChromiumProcesses(): number {
  const rows = execFileSync('ps', ['-eo', 'pid=,ppid=,comm='], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((line) => line.trim().split(/\s+/));
  const children = new Map<string, string[]>();
  for (const [pid, ppid] of rows) children.set(ppid!, [...(children.get(ppid!) ?? []), pid!]);
  const comm = new Map(rows.map(([pid, , name]) => [pid!, name ?? '']));
  const descendants: string[] = [];
  for (let queue = [String(process.pid)]; queue.length > 0; ) {
    const next = children.get(queue.shift()!) ?? [];
    descendants.push(...next);
    queue.push(...next);
  }
  return descendants.filter((pid) => comm.get(pid)?.includes('chrom')).length;
}

/** `work`, or 'hung' when it has not settled after `ms` (far longer than it takes: a hang, not a slow machine). */
async function settlesWithin<T>(work: Promise<T>, ms: number): Promise<T | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([work, new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** What a load gave: its result or its error's code, and the page's stats. */
async function load(renderer: PageRenderer, spider: ReturnType<typeof spiderFor>, url: string, stats: RenderedPageStats[], options: Omit<RenderLoadOptions, 'userAgent'> = {}) {
  const before = stats.length;
  try {
    const page = await renderer.loaderFor(spider, 'crawl-1')(url, { userAgent: 'Mozilla/5.0 (X11; Linux x86_64) Chrome/130.0 Safari/537.36', ...options });
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
    // other.test: the same site under another name, so another origin (HOST_RESOLVE).
    renderer = new PageRenderer(pool, new Map([['other.test', '127.0.0.1']]), log, (s) => stats.push(s));
  });
  afterAll(async () => {
    // The browser first: the guard's tunnels end with its connections.
    await pool.close();
    await site.close();
    await renderer.close();
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

  test('a page whose script spins for ever after load ends its load with ERR_TIMEOUT (render.timeoutMs), and the next page renders', async () => {
    const spider = spiderFor(site, { render: { mode: 'always', timeoutMs: 3000, waitFor: { maxWaitMs: 0 } } });
    const busy = await settlesWithin(load(renderer, spider, `${site.url}/busy`, stats), 90_000);
    expect(busy).toMatchObject({ code: 'ERR_TIMEOUT', message: expect.stringContaining('within 3000 ms (render.timeoutMs)') });
    const next = await settlesWithin(load(renderer, spider, `${site.url}/page`, stats), 90_000);
    expect(next).toMatchObject({ page: { status: 200 } });
  }, 200_000);

  test('a page that refreshes itself for ever (meta refresh 0) is taken as it loaded: its refresh is refused, the site sees it once, and the page closes', async () => {
    const spider = spiderFor(site, { render: { mode: 'always', timeoutMs: 5000, waitFor: { maxWaitMs: 1000 } } });
    const refresh = await settlesWithin(load(renderer, spider, `${site.url}/refresh`, stats), 90_000);
    expect(refresh).toMatchObject({ page: { status: 200, url: `${site.url}/refresh` } });
    expect((refresh as { page: { body: Buffer } }).page.body.toString()).toContain('<p>refresh</p>');
    expect(refresh !== 'hung' && refresh.stats?.navigationsRefused).toBeGreaterThanOrEqual(1);
    expect(site.count('/refresh')).toBe(1);
    // The page's close did not hang on a navigation: the next page of the same context renders.
    expect(await settlesWithin(load(renderer, spider, `${site.url}/page`, stats), 90_000)).toMatchObject({ page: { status: 200 } });
  }, 200_000);

  test('a page that sends the browser elsewhere (a script before its load, a meta refresh after it) answers a 302 to there: the fetcher takes it as a redirect, and the target is not requested by the page', async () => {
    const spider = spiderFor(site, { render: { mode: 'always', timeoutMs: 20_000, waitFor: { maxWaitMs: 1000 } } });
    const target = `${site.url}/page?landed=1`;
    const jump = await settlesWithin(load(renderer, spider, `${site.url}/jump?to=${encodeURIComponent(target)}`, stats), 90_000);
    expect(jump).toMatchObject({ page: { status: 302, headers: { location: target }, url: `${site.url}/jump?to=${encodeURIComponent(target)}` } });
    const moved = `${site.url}/page?landed=2`;
    const refresh = await settlesWithin(load(renderer, spider, `${site.url}/refresh-to?to=${encodeURIComponent(moved)}`, stats), 90_000);
    expect(refresh).toMatchObject({ page: { status: 302, headers: { location: moved } } });
    // The navigations were refused: the targets are the fetcher's to request, on their host's turn.
    expect(site.count('/page?landed=1')).toBe(0);
    expect(site.count('/page?landed=2')).toBe(0);
  }, 200_000);

  test('a page that opens 20 popups: each is closed as it opens and reaches nothing; no page and no Chromium process of the job is left after it', async () => {
    const spider = spiderFor(site, { render: { mode: 'always', maxRequestsPerPage: 5, waitFor: { maxWaitMs: 2000, networkIdle: true } } });
    expect(await load(renderer, spider, `${site.url}/page`, stats)).toMatchObject({ page: { status: 200 } });
    const baseline = ourChromiumProcesses();
    const popups = await load(renderer, spider, `${site.url}/popups?n=20`, stats);
    expect(popups).toMatchObject({ page: { status: 200 } });
    // Neither a popup's page nor anything its script asks for reached the site.
    expect(site.count('/popup?')).toBe(0);
    expect(site.count('/from-popup')).toBe(0);
    expect(pool.openPages()).toBe(0);
    await waitFor(() => ourChromiumProcesses() <= baseline, 30_000, `Chromium processes back to ${baseline} (now ${ourChromiumProcesses()})`);
    // And the next page of the crawl's context renders, with nothing of the popups around it.
    expect(await load(renderer, spider, `${site.url}/page`, stats)).toMatchObject({ page: { status: 200 } });
    expect(pool.openPages()).toBe(0);
  }, 120_000);

  test('WebSockets count against render.maxRequestsPerPage: of 30 a page opens with a budget of 5, 5 connect', async () => {
    const spider = spiderFor(site, { render: { mode: 'always', maxRequestsPerPage: 5, waitFor: { maxWaitMs: 2000 } } });
    const before = site.sockets;
    const sockets = await load(renderer, spider, `${site.url}/sockets?n=30`, stats);
    expect(sockets).toMatchObject({ page: { status: 200 }, stats: { requests: 5, overBudget: 25 } });
    expect(site.sockets - before).toBe(5);
  }, 120_000);

  test("redirects in the browser keep a plain request's rules: another origin, or a target the rules refuse, ends the load as that hop's 302; a chain past limits.maxRedirects is ERR_TOO_MANY_REDIRECTS", async () => {
    const spider = spiderFor(site, { render: { mode: 'always', waitFor: { maxWaitMs: 0 } }, limits: { maxRedirects: 2 } });
    const redirect = (to: string) => `/redirect?to=${encodeURIComponent(to)}`;
    const other = `http://other.test:${site.port}/page?other`;
    // The browser holds each hop until it is judged: a target the rules stop is never requested.
    const targets = ['/page?other', '/private', '/page?past-budget'];
    const away = await load(renderer, spider, `${site.url}${redirect(other)}`, stats);
    expect(away).toMatchObject({ page: { status: 302, url: `${site.url}${redirect(other)}`, headers: { location: other }, redirects: 0 } });
    // Another origin's page was not taken: the fetcher admits it as a new URL of the crawl (scope, robots.txt, its turn).
    // A same-origin hop is followed; the next, to a path the rules (robots.txt) refuse, is where it stops.
    const refused = `${site.url}/private`;
    const rules = (from: URL, to: URL) => from.origin === to.origin && to.pathname !== '/private';
    const stopped = await load(renderer, spider, `${site.url}${redirect(redirect(refused))}`, stats, { followRedirect: rules });
    expect(stopped).toMatchObject({ page: { status: 302, url: `${site.url}${redirect(refused)}`, headers: { location: refused }, redirects: 1 } });
    // An address the guard refuses, behind a redirect: that redirect, not a site's block (the guard's 403).
    const forbidden = `http://127.0.0.2:${site.port}/page`;
    expect(await load(renderer, spider, `${site.url}${redirect(forbidden)}`, stats)).toMatchObject({ page: { status: 302, headers: { location: forbidden } } });
    // Three same-origin hops with 2 allowed (or 1 left of the chain's budget).
    const chain = `${site.url}${redirect(redirect(redirect('/page?past-budget')))}`;
    expect(await load(renderer, spider, chain, stats)).toMatchObject({ code: 'ERR_TOO_MANY_REDIRECTS' });
    expect(await load(renderer, spider, `${site.url}${redirect(redirect('/page?past-budget'))}`, stats, { maxRedirects: 1 })).toMatchObject({ code: 'ERR_TOO_MANY_REDIRECTS' });
    expect(targets.map((t) => [t, site.count(t)])).toEqual(targets.map((t) => [t, 0]));
    expect(await load(renderer, spider, `${site.url}${redirect(redirect('/page?in-budget'))}`, stats)).toMatchObject({ page: { status: 200, redirects: 2 } });
    expect(site.count('/page?in-budget')).toBe(1);
  }, 120_000);

  test('a download is not rendered and not retried: ERR_RENDER_DOWNLOAD', async () => {
    const spider = spiderFor(site, { render: { mode: 'always', waitFor: { maxWaitMs: 0 } } });
    const download = await load(renderer, spider, `${site.url}/download`, stats);
    expect(download).toMatchObject({ code: 'ERR_RENDER_DOWNLOAD' });
    expect(download.code !== undefined && (download as { message: string }).message).toContain('is a download');
  }, 60_000);

  test("a TMPDIR too deep for Chromium's socket paths: the renderer's directory goes under /tmp, and pages render", async () => {
    const deep = join(mkdtempSync(join(tmpdir(), 'cf-deep-')), 'a-directory-name-long-enough-to-push-chromium-socket-path-past-its-limit');
    mkdirSync(deep);
    expect(scratchBase(deep)).toBe('/tmp');
    const deepPool = new BrowserPool({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', retireAfterPages: 1000, log, tmpDir: deep });
    const deepRenderer = new PageRenderer(deepPool, new Map(), log, (s) => stats.push(s));
    try {
      // Before: Chromium aborted at start ("Socket path too long"), and every page failed.
      expect(await load(deepRenderer, spiderFor(site), `${site.url}/page`, stats)).toMatchObject({ page: { status: 200 } });
    } finally {
      await deepPool.close();
      await deepRenderer.close();
      rmSync(dirname(deep), { recursive: true, force: true });
    }
  }, 120_000);
});
