import { execFileSync } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { appProduct, products, scriptSiteSpider, startScriptSite } from '../fixtures/script-site.mjs';
import { comparable, dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';

const lastLine = (stdout: string) => JSON.parse(stdout.trim().split('\n').pop()!);
const FIELDS = ['type', 'url', 'title', 'price', 'sku'];

/** The site's products as the spider should store them: the plain section's, the app section's, or both. */
function truth(url: string, count: number, sections: ('plain' | 'app')[]) {
  return products(count).flatMap((p) =>
    sections.map((section) => {
      const shown = section === 'app' ? appProduct(p) : p;
      return { type: 'product', url: `${url}/${section}/item/${p.id}.html`, title: shown.title, price: shown.price, sku: shown.sku };
    }),
  );
}

/**
 * Chromium processes (Debian's: /usr/lib/chromium/chromium and its helpers) whose temp directory is
 * under `dir`: those of the renderers given that TMPDIR. A killed renderer's browser is orphaned,
 * no longer a descendant of this test, and another jest worker may run browsers of its own meanwhile:
 * the environment tells them apart.
 */
function chromiumPidsUnder(dir: string): number[] {
  let pids: number[];
  try {
    pids = execFileSync('pgrep', ['-f', '/usr/lib/chromium/chromium'], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
  return pids.filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, 'latin1')
        .split('\0')
        .some((entry) => entry.startsWith(`TMPDIR=${dir}/`));
    } catch {
      return false; // ended meanwhile
    }
  });
}

/** A listener that records every connection made to it (the guard test's would-be victims). */
async function trap(host: string): Promise<{ port: number; hits: string[]; close(): Promise<void> }> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    res.end('secret');
  });
  server.on('connection', () => hits.push('(connection)'));
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return { port: (server.address() as AddressInfo).port, hits, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('pages that need a browser (render)', () => {
  const prefixes: string[] = [];
  afterAll(async () => {
    for (const p of prefixes) await dropPrefix(p);
  });
  const envFor = (name: string, extra: Record<string, string> = {}) => {
    const prefix = uniquePrefix(name);
    prefixes.push(prefix);
    return testEnv(prefix, extra);
  };

  test('render "always" for the app section only: items exact from both sections, each app page rendered once, no plain page ever opened in a browser, images never loaded', async () => {
    const site = await startScriptSite({ products: 30, perPage: 10 });
    const dir = tempDir('render-rules');
    try {
      const spider = writeJson(dir, 'shop.json', scriptSiteSpider(site.url, { mode: 'never', rules: [{ match: '/app/', mode: 'always' }] }));
      const out = join(dir, 'items.jsonl');
      const run = await runCli(['crawl', spider, '--out', out, '--json', '--quiet'], { env: envFor('render-rules') });
      expect(run.code).toBe(0);
      expect(comparable(readJsonl(out), FIELDS)).toEqual(comparable(truth(site.url, 30, ['plain', 'app']), FIELDS));
      // 1 index, 3 + 30 plain pages, 3 + 30 app pages.
      expect(lastLine(run.stdout).counters).toMatchObject({ seen: 67, fetched: 67, parsed: 67, items: 60, written: 60, invalid: 0, failed: 0, rendered: 33, renderSkipped: 0 });
      const appPages = [...site.visits.browser.keys()].filter((p) => p.startsWith('/app/'));
      expect(appPages).toHaveLength(33);
      expect(Math.max(...site.visits.browser.values())).toBe(1);
      // A browser never opened a plain page, and nothing fetched an app page without one.
      expect([...site.visits.browser.keys()].filter((p) => !p.startsWith('/app/'))).toEqual([]);
      expect([...site.visits.plain.keys()].filter((p) => p.startsWith('/app/'))).toEqual([]);
      expect(site.stats).toMatchObject({ appPages: 33, script: 33, api: 33, images: 0 });
    } finally {
      await site.close();
    }
  });

  test('render "auto": the script-built pages are rendered and the plain ones are not (counted renderSkipped); items exact', async () => {
    const site = await startScriptSite({ products: 30, perPage: 10 });
    const dir = tempDir('render-auto');
    try {
      const spider = writeJson(dir, 'shop.json', scriptSiteSpider(site.url, 'auto'));
      const out = join(dir, 'items.jsonl');
      const run = await runCli(['crawl', spider, '--out', out, '--json', '--quiet'], { env: envFor('render-auto') });
      expect(run.code).toBe(0);
      expect(comparable(readJsonl(out), FIELDS)).toEqual(comparable(truth(site.url, 30, ['plain', 'app']), FIELDS));
      expect(lastLine(run.stdout).counters).toMatchObject({ seen: 67, fetched: 67, items: 60, written: 60, invalid: 0, failed: 0, rendered: 33, renderSkipped: 34 });
      // Every app page was rendered once, and no other page was.
      const browser = [...site.visits.browser.keys()];
      expect(browser.filter((p) => p.startsWith('/app/'))).toHaveLength(33);
      expect(browser.filter((p) => !p.startsWith('/app/'))).toEqual([]);
      expect([...site.visits.browser.values()].every((n) => n === 1)).toBe(true);
      // Every plain page was fetched once, without a browser; app pages were judged from their plain
      // page until 5 of a kind had needed a browser, then only a sample of them.
      const plain = [...site.visits.plain.keys()];
      expect(plain.filter((p) => !p.startsWith('/app/'))).toHaveLength(34);
      expect([...site.visits.plain.values()].every((n) => n === 1)).toBe(true);
      expect(plain.filter((p) => p.startsWith('/app/')).length).toBeGreaterThanOrEqual(5);
    } finally {
      await site.close();
    }
  });

  test('render "auto" learns a kind of page (host and directory): once such pages needed a browser, they go straight to render, but for a sample still judged plain', async () => {
    const site = await startScriptSite({ products: 80, perPage: 20 });
    const dir = tempDir('render-learn');
    try {
      const url = site.url.replace('127.0.0.1', 'app.shop.test');
      const spider = writeJson(dir, 'shop.json', { ...scriptSiteSpider(url, 'auto'), startUrls: [`${url}/app/list/1.html`] });
      const out = join(dir, 'items.jsonl');
      const run = await runCli(['crawl', spider, '--out', out, '--json', '--quiet', '--concurrency', '4'], { env: envFor('render-learn', { HOST_RESOLVE: 'app.shop.test:127.0.0.1' }) });
      expect(run.code).toBe(0);
      expect(comparable(readJsonl(out), FIELDS)).toEqual(comparable(truth(url, 80, ['app']), FIELDS));
      expect(lastLine(run.stdout).counters).toMatchObject({ seen: 84, fetched: 84, items: 80, rendered: 84, renderSkipped: 0 });
      // 84 pages rendered; only the first judgements and a sample of about 10% were fetched plain first.
      const judged = [...site.visits.plain.values()].reduce((a, b) => a + b, 0);
      expect(judged).toBeGreaterThanOrEqual(5);
      expect(judged).toBeLessThanOrEqual(30);
      expect([...site.visits.browser.values()].reduce((a, b) => a + b, 0)).toBe(84);
    } finally {
      await site.close();
    }
  });

  test("a rendered page's requests to its own host count against the host's delay: its next page comes that many delays later", async () => {
    const site = await startScriptSite({ products: 3, perPage: 3 });
    const dir = tempDir('render-polite');
    try {
      // One page at a time, 2 s between requests; each app page makes 2 more (its script, its JSON).
      const spider = writeJson(dir, 'shop.json', { ...scriptSiteSpider(site.url, 'always'), startUrls: [`${site.url}/app/list/1.html`], politeness: { concurrencyPerHost: 1, delayPerHost: 2000 } });
      const run = await runCli(['crawl', spider, '--out', join(dir, 'items.jsonl'), '--json', '--quiet'], { env: envFor('render-polite') });
      expect(run.code).toBe(0);
      expect(lastLine(run.stdout).counters).toMatchObject({ fetched: 4, rendered: 4, items: 3 });
      const navigations = site.requests.filter((r) => /^\/app\/.*\.html$/.test(r.path)).map((r) => r.at);
      expect(navigations).toHaveLength(4);
      // The item pages' (the list page's navigation waited for the browser to start, a lag of its own).
      const gaps = navigations.slice(2).map((at, i) => at - navigations[i + 1]!);
      // 3 requests of the host per page: its next page 6 s after it began (the browser's start of a
      // navigation lags the grant by a moment, which varies); 2 s apart, or the time to render, without.
      expect(Math.min(...gaps)).toBeGreaterThanOrEqual(5000);
    } finally {
      await site.close();
    }
  });

  test("the SSRF guard holds for the browser: a page's script reaching for 169.254.169.254, another loopback address and a private one gets nowhere, and the page's own content is still extracted", async () => {
    const loopback = await trap('127.0.0.2');
    const local = await trap('127.0.0.1');
    const probes = [
      'http://169.254.169.254/latest/meta-data/',
      'https://169.254.169.254/latest/meta-data/',
      `http://127.0.0.2:${loopback.port}/steal`,
      `ws://127.0.0.2:${loopback.port}/socket`,
      'http://10.255.255.1/admin',
      `http://localhost:${local.port}/admin`,
    ];
    const site = await startScriptSite({ products: 4, perPage: 4, probes });
    const dir = tempDir('render-guard');
    try {
      // The site's own address is allowed (allowedAddresses: 127.0.0.1), and only its port is the site.
      // A start URL on another loopback address is refused before a browser opens it.
      const forbidden = `http://127.0.0.2:${loopback.port}/page.html`;
      const spider = writeJson(dir, 'shop.json', { ...scriptSiteSpider(site.url, 'always'), startUrls: [`${site.url}/app/list/1.html`, forbidden] });
      const out = join(dir, 'items.jsonl');
      const run = await runCli(['crawl', spider, '--out', out, '--json'], { env: envFor('render-guard') });
      expect(run.code).toBe(0);
      expect(lastLine(run.stdout).counters).toMatchObject({ fetched: 5, rendered: 5, failed: 1 });
      const deadLettered = run.stderr
        .split('\n')
        .filter((l) => l.includes('"dead-lettered"'))
        .map((l) => JSON.parse(l) as { url: string; code: string });
      expect(deadLettered.map(({ url, code }) => ({ url, code }))).toEqual([{ url: forbidden, code: 'ERR_FORBIDDEN_ADDRESS' }]);
      expect(comparable(readJsonl(out), FIELDS)).toEqual(comparable(truth(site.url, 4, ['app']), FIELDS));
      expect(loopback.hits).toEqual([]);
      expect(local.hits).toEqual([]);
      // Each was refused by the guard, by address, with no connection made.
      const refused = run.stderr
        .split('\n')
        .filter((l) => l.includes('the SSRF guard refuses'))
        .map((l) => JSON.parse(l).target as string);
      expect(new Set(refused)).toEqual(new Set(['169.254.169.254:80', '169.254.169.254:443', `127.0.0.2:${loopback.port}`, '10.255.255.1:80', `localhost:${local.port}`]));
    } finally {
      await site.close();
      await loopback.close();
      await local.close();
    }
  });

  test("jobs waiting in the render queue are the fetch stage's: the reconciler leaves them alone while no renderer runs, and a renderer started later finishes the crawl, each page once", async () => {
    const site = await startScriptSite({ products: 10, perPage: 10 });
    const dir = tempDir('render-wait');
    // BullMQ's job lock at its default (30 s), not testEnv's 5 s (which the kill tests need): this
    // test counts each page's visits, and on a loaded machine the renderer's event loop stalls for
    // seconds while Chromium starts (1 to 3.5 s measured), its first job's 5 s lock lapses ("could
    // not renew lock"), and the stalled-job check hands that job out again while its first run
    // goes on: two renders of the list page, 30 to 100 ms apart (at least once, as designed).
    const env = envFor('render-wait', { RECONCILE_INTERVAL_MS: '300', RECONCILE_GRACE_MS: '500', LOCK_DURATION_MS: '30000' });
    const workers: ReturnType<typeof spawnCli>[] = [];
    try {
      const spider = writeJson(dir, 'shop.json', { ...scriptSiteSpider(site.url, 'always'), startUrls: [`${site.url}/app/list/1.html`] });
      const out = join(dir, 'items.jsonl');
      expect((await runCli(['seed', spider, '--sink', out, '--crawl-id', 'shop'], { env })).code).toBe(0);
      // A fetcher (the reconciler runs in every worker) but no renderer, for many reconciler rounds.
      workers.push(spawnCli(['worker', 'fetcher'], { env }));
      await new Promise((resolve) => setTimeout(resolve, 5000));
      const waiting = JSON.parse((await runCli(['status', '--crawl-id', 'shop', '--json'], { env })).stdout);
      expect(waiting.counters).toMatchObject({ seen: 1, fetched: 0, reconciled: 0 });
      expect(site.visits.plain.size + site.visits.browser.size).toBe(0);
      for (const stage of ['renderer', 'parser', 'writer']) workers.push(spawnCli(['worker', stage], { env }));
      expect((await runCli(['wait', '--crawl-id', 'shop', '--timeout', '90'], { env, timeoutMs: 100_000 })).code).toBe(0);
      expect(comparable(readJsonl(out), FIELDS)).toEqual(comparable(truth(site.url, 10, ['app']), FIELDS));
      const status = JSON.parse((await runCli(['status', '--crawl-id', 'shop', '--json'], { env })).stdout);
      expect(status.counters).toMatchObject({ seen: 11, fetched: 11, rendered: 11, items: 10, reconciled: 0 });
      expect([...site.visits.browser.values()]).toEqual(Array(11).fill(1));
      expect(site.visits.plain.size).toBe(0);
    } finally {
      for (const w of workers) w.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.result));
      await site.close();
    }
  });

  test('kill -9 of a renderer mid-crawl, twice: items exact, every page rendered to the end, and no Chromium process outlives its renderer', async () => {
    const site = await startScriptSite({ products: 60, perPage: 10, apiDelayMs: 150 });
    const dir = tempDir('render-kill');
    const env = envFor('render-kill', { LOCK_DURATION_MS: '4000', TMPDIR: dir });
    const workers: ReturnType<typeof spawnCli>[] = [];
    const renderedSoFar = () => site.visits.browser.size;
    const strayChromium = () => chromiumPidsUnder(dir);
    try {
      const spider = writeJson(dir, 'shop.json', { ...scriptSiteSpider(site.url, 'always'), startUrls: [`${site.url}/app/list/1.html`] });
      const out = join(dir, 'items.jsonl');
      const seeded = await runCli(['seed', spider, '--sink', out, '--crawl-id', 'shop'], { env });
      expect(seeded.code).toBe(0);
      for (const stage of ['fetcher', 'parser', 'writer']) workers.push(spawnCli(['worker', stage, '--concurrency', '4'], { env }));
      for (const renderedAtLeast of [12, 30]) {
        const renderer = spawnCli(['worker', 'renderer', '--concurrency', '3'], { env });
        await waitFor(() => renderedSoFar() >= renderedAtLeast, 90_000, `${renderedAtLeast} pages rendered`);
        expect(strayChromium().length).toBeGreaterThan(0);
        renderer.kill('SIGKILL');
        await renderer.result;
        await waitFor(() => strayChromium().length === 0, 10_000, "the killed renderer's Chromium processes to end");
      }
      const last = spawnCli(['worker', 'renderer', '--concurrency', '3'], { env });
      workers.push(last);
      const waited = await runCli(['wait', '--crawl-id', 'shop', '--timeout', '150'], { env, timeoutMs: 160_000 });
      expect(waited.code).toBe(0);
      expect(comparable(readJsonl(out), FIELDS)).toEqual(comparable(truth(site.url, 60, ['app']), FIELDS));
      const status = JSON.parse((await runCli(['status', '--crawl-id', 'shop', '--json'], { env })).stdout);
      // Each page's effects applied once, however many times a killed renderer had begun it.
      expect(status.counters).toMatchObject({ seen: 66, fetched: 66, rendered: 66, items: 60, written: 60, failed: 0 });
      for (const w of workers) w.kill('SIGTERM');
      expect((await Promise.all(workers.map((w) => w.result))).map((r) => r.code)).toEqual(workers.map(() => 0));
      expect(strayChromium()).toEqual([]);
    } finally {
      for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
      await site.close();
    }
  });
});
