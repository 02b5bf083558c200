import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { catalogueSpider, groundTruth, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { ROOT, dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';
import { gotoSteady } from '../helpers/network-change.js';
import { freePort, waitForPort } from '../helpers/ports.js';

const USER = 'ops';
const PASSWORD = 'dashboard-pw-7';
const auth = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
/** Screenshots and other files a person may want to look at after the run. */
const ARTIFACTS = join(ROOT, 'test-artifacts');

/** Debian's Prometheus on a loopback port, scraping the given targets every second. */
async function startPrometheus(dir: string, workers: number[], dashboard: number): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await freePort();
  const config = [
    'global: { scrape_interval: 1s, evaluation_interval: 1s }',
    'scrape_configs:',
    '  - job_name: workers',
    `    static_configs: [{ targets: [${workers.map((p) => `'127.0.0.1:${p}'`).join(', ')}] }]`,
    '  - job_name: dashboard',
    `    basic_auth: { username: ${USER}, password: ${PASSWORD} }`,
    `    static_configs: [{ targets: ['127.0.0.1:${dashboard}'] }]`,
  ].join('\n');
  writeFileSync(join(dir, 'prometheus.yml'), config);
  const child: ChildProcess = spawn(
    'prometheus',
    [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'tsdb')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: 'ignore' },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitForPort(port, 20_000, 'prometheus');
  await waitFor(async () => (await fetch(`${url}/-/ready`).catch(() => undefined))?.ok === true, 20_000, 'prometheus to be ready');
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

async function promQuery(url: string, query: string): Promise<number | undefined> {
  const res = (await (await fetch(`${url}/api/v1/query?query=${encodeURIComponent(query)}`)).json()) as { data: { result: { value: [number, string] }[] } };
  const first = res.data.result[0];
  return first ? Number(first.value[1]) : undefined;
}

describe('watching the fleet: worker and dashboard metrics scraped by a real Prometheus, Bull Board in Chromium', () => {
  const prefix = uniquePrefix('watch');
  const dir = tempDir('watch');
  const processes: ReturnType<typeof spawnCli>[] = [];
  afterAll(async () => {
    for (const p of processes) p.kill('SIGTERM');
    await Promise.all(processes.map((p) => p.result));
    await dropPrefix(prefix);
  });

  test('the totals Prometheus holds equal the crawl counters; the dashboard needs its password, shows the queues and a dead letter with its reason', async () => {
    const shape = siteShape(300, 25);
    const site = await startCatalogueSite(shape, { delayMs: 20 });
    const prometheusDir = join(dir, 'prometheus');
    mkdirSync(prometheusDir);
    const ports = { fetcher: await freePort(), parser: await freePort(), writer: await freePort(), dashboard: await freePort() };
    const env = testEnv(prefix, { METRICS_HOST: '127.0.0.1', DASHBOARD_USER: USER, DASHBOARD_PASSWORD: PASSWORD });
    for (const stage of ['fetcher', 'parser', 'writer'] as const) {
      processes.push(spawnCli(['worker', stage, '--concurrency', '8'], { env: { ...env, METRICS_PORT: String(ports[stage]) } }));
    }
    processes.push(spawnCli(['dashboard', '--port', String(ports.dashboard)], { env }));
    await Promise.all(Object.entries(ports).map(([what, port]) => waitForPort(port, 20_000, what)));
    const prometheus = await startPrometheus(prometheusDir, [ports.fetcher, ports.parser, ports.writer], ports.dashboard);
    const dashboard = `http://127.0.0.1:${ports.dashboard}`;
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      // Without the password: 401 everywhere but the probes.
      expect((await fetch(`${dashboard}/`)).status).toBe(401);
      expect((await fetch(`${dashboard}/api/crawls`)).status).toBe(401);
      expect((await fetch(`${dashboard}/metrics`)).status).toBe(401);
      expect((await fetch(`${dashboard}/healthz`)).status).toBe(200);
      expect((await fetch(`${dashboard}/readyz`)).status).toBe(200);
      for (const port of [ports.fetcher, ports.parser, ports.writer]) {
        expect(await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()).toEqual({ ready: true, checks: [{ name: 'redis', ok: true }] });
      }

      const out = join(dir, 'items.jsonl');
      const seeded = await runCli(['seed', writeJson(dir, 'catalogue.json', catalogueSpider(site.url)), '--sink', out], { env });
      expect(seeded.code).toBe(0);
      const crawlId = seeded.stdout.trim().split('\n').pop()!;

      // Bull Board, during the crawl, in a real browser with the credentials.
      const context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD }, viewport: { width: 1400, height: 900 } });
      const page = await context.newPage();
      await gotoSteady(page, `${dashboard}/`);
      for (const queue of ['fetch', 'parse', 'write']) await page.getByText(queue, { exact: true }).first().waitFor({ timeout: 20_000 });

      const waited = await runCli(['wait', '--crawl-id', crawlId, '--timeout', '150'], { env, timeoutMs: 160_000 });
      expect(waited.code).toBe(0);
      const status = JSON.parse((await runCli(['status', '--crawl-id', crawlId, '--json'], { env })).stdout);
      const truth = groundTruth(site.url, shape);
      expect(readJsonl(out)).toHaveLength(truth.products.length + truth.listings.length);
      expect(status.counters).toMatchObject({ failed: 1, written: truth.products.length + truth.listings.length });

      // /api/crawls gives the status objects, as `status --json` does.
      const crawls = (await (await fetch(`${dashboard}/api/crawls`, { headers: { authorization: auth } })).json()) as { crawlId: string }[];
      const { proxies: _proxies, ...contractStatus } = status;
      expect(crawls.find((c) => c.crawlId === crawlId)).toEqual(contractStatus);

      // Bull Board's counts match the status: the dead letter is the fetch queue's one failed job,
      // shown with its reason.
      await gotoSteady(page, `${dashboard}/queue/fetch?status=failed`);
      await page.getByText('ERR_HTTP_STATUS: HTTP 404').first().waitFor({ timeout: 20_000 });
      const bullCounts = (await (await fetch(`${dashboard}/api/queues`, { headers: { authorization: auth } })).json()) as { queues: { name: string; counts: Record<string, number> }[] };
      for (const stage of ['fetch', 'parse', 'write'] as const) {
        const counts = bullCounts.queues.find((q) => q.name === stage)!.counts;
        expect({ stage, waiting: counts.waiting, active: counts.active, delayed: counts.delayed, failed: counts.failed }).toEqual({ stage, ...status.queues[stage] });
      }
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'bull-board-failed-fetch.png'), fullPage: true });

      // Prometheus scraped the three workers and the dashboard: wait for a scrape after the end, then
      // the workers' totals and the dashboard's crawl gauges both equal the counters.
      const c = status.counters;
      await waitFor(async () => (await promQuery(prometheus.url, `crawlfleet_crawl_written_total{crawl="${crawlId}"}`)) === c.written, 20_000, 'a scrape after the crawl');
      await waitFor(async () => (await promQuery(prometheus.url, 'sum(crawlfleet_items_written_total)')) === c.written, 20_000, 'the writer totals');
      const totals = {
        fetched: await promQuery(prometheus.url, 'sum(crawlfleet_pages_fetched_total)'),
        parsed: await promQuery(prometheus.url, 'sum(crawlfleet_pages_parsed_total)'),
        items: await promQuery(prometheus.url, 'sum(crawlfleet_items_parsed_total)'),
        written: await promQuery(prometheus.url, 'sum(crawlfleet_items_written_total)'),
        failed: await promQuery(prometheus.url, 'sum(crawlfleet_urls_failed_total)'),
        // the seeder admitted the start URL; the workers the rest
        seen: ((await promQuery(prometheus.url, 'sum(crawlfleet_urls_seen_total)')) ?? 0) + 1,
        deadLetters: await promQuery(prometheus.url, 'sum(crawlfleet_dead_letters_total{stage="fetch",code="ERR_HTTP_STATUS"})'),
      };
      expect(totals).toEqual({ fetched: c.fetched, parsed: c.parsed, items: c.items, written: c.written, failed: c.failed, seen: c.seen, deadLetters: 1 });
      for (const counter of ['seen', 'fetched', 'parsed', 'items', 'written', 'failed', 'skipped'] as const) {
        expect({ counter, value: await promQuery(prometheus.url, `crawlfleet_crawl_${counter}_total{crawl="${crawlId}"}`) }).toEqual({ counter, value: c[counter] });
      }
      expect(await promQuery(prometheus.url, 'sum(crawlfleet_http_responses_total)')).toBe(c.fetched);
      expect(await promQuery(prometheus.url, 'max(crawlfleet_queue_backlog{queue="fetch"})')).toBe(0);

      // Both endpoints follow Prometheus's naming conventions: promtool's linter has nothing to say.
      const endpoints = { fetcher: `http://127.0.0.1:${ports.fetcher}/metrics`, writer: `http://127.0.0.1:${ports.writer}/metrics`, dashboard: `${dashboard}/metrics` };
      for (const [what, url] of Object.entries(endpoints)) {
        const text = await (await fetch(url, { headers: { authorization: auth } })).text();
        expect(text).toMatch(/^process_cpu_seconds_total\{/m);
        const linted = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
        expect({ what, status: linted.status, out: `${linted.stdout}${linted.stderr}`.trim() }).toEqual({ what, status: 0, out: '' });
      }
    } finally {
      await browser.close();
      await prometheus.stop();
      await site.close();
    }
  });
});
