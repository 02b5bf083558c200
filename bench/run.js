// npm run bench: crawlfleet's end-to-end crawl against a bare got+cheerio loop on the same local
// site, side by side, alternating runs. Ratios matter here; absolute times on shared machines are noise.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import got from 'got';
import * as cheerio from 'cheerio';
import { catalogueSpider, groundTruth, siteShape, startCatalogueSite } from '../test/fixtures/catalogue-site.mjs';
import { benchWriter } from './writer.js';

const ROOT = new URL('..', import.meta.url).pathname;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);

/** The baseline: one process, an in-memory frontier, the same selectors, no durability. */
async function bareLoop(site, spider) {
  const seen = new Set([spider.startUrls[0]]);
  const queue = [spider.startUrls[0]];
  let items = 0;
  let pages = 0;
  async function worker() {
    while (queue.length > 0) {
      const url = queue.shift();
      const res = await got(url, { throwHttpErrors: false, retry: { limit: 0 } });
      pages++;
      if (res.statusCode !== 200) continue;
      const $ = cheerio.load(res.body);
      const base = new URL($('base[href]').attr('href') ?? url, url).href;
      if (/\/product\/p-\d+\.html$/.test(url) && $('td.sku').length) items++;
      if (/\/catalogue\/page-\d+\.html$/.test(url)) items += $('article.product').length;
      $('a.catalogue, a.category, ul.pager a, article.product h3 a').each((_, a) => {
        const u = new URL($(a).attr('href'), base);
        u.hash = '';
        if (u.host !== new URL(site.url).host) return;
        if (!seen.has(u.href)) {
          seen.add(u.href);
          queue.push(u.href);
        }
      });
    }
  }
  // Workers exit when the queue is momentarily empty; restart until it stays empty.
  while (queue.length > 0) await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return { pages, items };
}

function crawlfleet(spiderFile, out, prefix) {
  return new Promise((resolve, reject) => {
    const child = spawn(join(ROOT, 'bin/crawlfleet'), ['crawl', spiderFile, '--out', out, '--json', '--quiet', '--concurrency', String(CONCURRENCY)], {
      env: { ...process.env, QUEUE_PREFIX: prefix, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(stdout.trim().split('\n').pop())) : reject(new Error(`crawl exited ${code}`))));
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const shape = siteShape(2000, 25);
const dir = mkdtempSync(join(tmpdir(), 'bench-'));
const runs = { baseline: [], crawlfleet: [] };
let expectedPages;
for (let round = 0; round < ROUNDS; round++) {
  for (const kind of round % 2 === 0 ? ['baseline', 'crawlfleet'] : ['crawlfleet', 'baseline']) {
    const site = await startCatalogueSite(shape);
    // The baseline has no per-host limit, so neither does crawlfleet here (the default is 8): the
    // comparison is of the machinery, and the politeness round trips are still paid on every page.
    const spider = catalogueSpider(site.url, { politeness: { concurrencyPerHost: CONCURRENCY } });
    expectedPages = groundTruth(site.url, shape).paths.size;
    const file = join(dir, `spider-${round}.json`);
    writeFileSync(file, JSON.stringify(spider));
    const started = performance.now();
    let result;
    if (kind === 'baseline') result = await bareLoop(site, spider);
    else {
      const status = await crawlfleet(file, join(dir, `items-${round}.jsonl`), `bench-${process.pid}-${round}`);
      result = { pages: status.counters.fetched, items: status.counters.written };
    }
    const seconds = (performance.now() - started) / 1000;
    await site.close();
    if (result.pages !== expectedPages) throw new Error(`${kind} fetched ${result.pages} pages, expected ${expectedPages}`);
    runs[kind].push({ seconds, pagesPerSecond: result.pages / seconds, items: result.items });
    console.log(`round ${round + 1} ${kind.padEnd(10)} ${seconds.toFixed(2)} s  ${(result.pages / seconds).toFixed(0)} pages/s  ${result.items} items`);
  }
}
const base = median(runs.baseline.map((r) => r.pagesPerSecond));
const ours = median(runs.crawlfleet.map((r) => r.pagesPerSecond));
const results = {
  date: new Date().toISOString(),
  machine: { node: process.version, cores: (await import('node:os')).cpus().length },
  site: { pages: expectedPages, products: shape.products },
  concurrency: CONCURRENCY,
  rounds: ROUNDS,
  crawl: {
    baselinePagesPerSecond: Math.round(base),
    crawlfleetPagesPerSecond: Math.round(ours),
    ratio: Number((ours / base).toFixed(3)),
    runs,
  },
};
if (process.env.MONGO_URL) results.writer = await benchWriter(process.env.MONGO_URL);
writeFileSync(join(ROOT, 'bench', 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
console.log(`\ncrawlfleet ${Math.round(ours)} pages/s vs bare got+cheerio ${Math.round(base)} pages/s: ratio ${results.crawl.ratio} (median of ${ROUNDS})`);
console.log('written to bench/results.json');
