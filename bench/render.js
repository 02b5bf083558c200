// The render benchmark: a shop whose pages are built by a script in the browser
// (test/fixtures/script-site.mjs, its `/app/` section: N products, 20 a listing page, so
// N + N/20 pages, each an empty shell filled from a JSON API), crawled with Chromium by:
// - baseline: Crawlee's PlaywrightCrawler (bench/render-baseline.js, its own process), headless,
//   images, fonts and media blocked, every page awaited until `#app[data-ready]`, the browser retired
//   after 100 pages;
// - crawlfleet: `crawlfleet crawl` (every stage in one process) on the fixture's spider with
//   `render: "always"`, its start URL the app section's first listing page.
// Both on the same site in the same process as this script (its CPU is in neither figure), with the
// same concurrency, taking turns in each round (rotated each round). Every run must produce the N
// products exactly (title, price and SKU checked against the site's), or the run fails.
//
// Measured per run, over the crawler's whole process tree (Chromium's processes included; see
// bench/process-tree.js): wall time from its start to its exit, pages/s, CPU ms per page (user +
// system of every process of the tree, exact, the orphaned ones included), the tree's peak RSS (sum
// over its processes at one sample, shared pages counted in each) and peak PSS. A page is one of the
// N + N/20 pages of the crawl: a retried or twice-loaded page costs, it does not count twice. For
// crawlfleet also Redis's CPU and commands per page (from INFO, Redis being outside the tree).
// Figures are medians over the rounds; the ratios are crawlfleet's medians over the baseline's.
// The table goes to stdout, progress to stderr, everything to bench/results-render.json.
//
// node bench/render.js [--pages N] [--rounds R] [--concurrency C] [--modes baseline,crawlfleet]
//   [--per-page 20] [--api-delay MS] [--chromium /usr/bin/chromium] [--block cdp|route|none]
//   [--fingerprints on|off] [--out bench/results-render.json]
// Env, for `npm run bench` (scripts/bench.sh): BENCH_RENDER_PAGES, BENCH_RENDER_ROUNDS (else
// BENCH_ROUNDS, else 3), BENCH_RENDER_CONCURRENCY, BENCH_RENDER_MODES, BENCH_CHROMIUM; REDIS_URL
// (the crawlfleet mode needs a Redis: redis://127.0.0.1:6379 when not given).
// --block: how the baseline blocks images, fonts and media: `cdp` (default) is Crawlee's
// blockRequests (URL patterns, Chromium drops them itself), `route` is a Playwright route by resource
// type (every request through Node, as a renderer that counts a page's requests does).
// --fingerprints: Crawlee's browser fingerprints (its default: on; a generated fingerprint injected
// into every page).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { appProduct, products, scriptSiteSpider, startScriptSite } from '../test/fixtures/script-site.mjs';
import { runTreeMeasured } from './process-tree.js';
import { median } from './report.js';

const ROOT = new URL('..', import.meta.url).pathname;
const CLI = join(ROOT, 'bin/crawlfleet');
const env = process.env;

const { values: flags } = parseArgs({
  options: {
    pages: { type: 'string', default: env.BENCH_RENDER_PAGES ?? '200' },
    rounds: { type: 'string', default: env.BENCH_RENDER_ROUNDS ?? env.BENCH_ROUNDS ?? '3' },
    concurrency: { type: 'string', default: env.BENCH_RENDER_CONCURRENCY ?? '4' },
    modes: { type: 'string', default: env.BENCH_RENDER_MODES ?? 'baseline,crawlfleet' },
    'per-page': { type: 'string', default: '20' },
    'api-delay': { type: 'string', default: '0' },
    chromium: { type: 'string', default: env.BENCH_CHROMIUM ?? '/usr/bin/chromium' },
    block: { type: 'string', default: 'cdp' },
    fingerprints: { type: 'string', default: 'on' },
    out: { type: 'string', default: join(ROOT, 'bench', 'results-render.json') },
  },
});
const PRODUCTS = Number(flags.pages);
const ROUNDS = Number(flags.rounds);
const CONCURRENCY = Number(flags.concurrency);
const PER_PAGE = Number(flags['per-page']);
const MODE_LIST = flags.modes.split(',').filter(Boolean);
for (const [name, v] of Object.entries({ pages: PRODUCTS, rounds: ROUNDS, concurrency: CONCURRENCY, 'per-page': PER_PAGE })) {
  if (!(Number.isInteger(v) && v >= 1)) throw new Error(`--${name}: a whole number of at least 1, not ${v}`);
}
if (!['cdp', 'route', 'none'].includes(flags.block)) throw new Error(`--block: cdp, route or none, not ${flags.block}`);
if (!['on', 'off'].includes(flags.fingerprints)) throw new Error(`--fingerprints: on or off, not ${flags.fingerprints}`);
if (!existsSync(flags.chromium)) throw new Error(`no Chromium at ${flags.chromium} (--chromium, BENCH_CHROMIUM; Debian: apt-get install chromium)`);

const progress = (line) => process.stderr.write(`[bench render ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const round = (x, digits = 0) => (x === undefined || x === null || Number.isNaN(x) ? null : Number(x.toFixed(digits)));

function commit() {
  const head = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no', '--', '.', ':!bench/results*.json'], { cwd: ROOT, encoding: 'utf8' }).trim() !== '';
  return dirty ? `${head}+uncommitted` : head;
}

/** Pure: the modes of one round, rotated so each takes each position in turn (as bench/run.js). */
const roundOrder = (modes, r) => modes.map((_, i) => modes[(i + r) % modes.length]);

/**
 * Pure over the file: the JSONL items checked against the site's products. `items` counts the
 * distinct products whose title, price and SKU are right; `lines` every line.
 */
function checkItems(file, expected) {
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const right = new Set();
  const wrong = [];
  for (const line of lines) {
    const item = JSON.parse(line);
    const want = expected.get(item.sku);
    if (want && item.title === want.title && Number(item.price) === want.price) right.add(item.sku);
    else if (wrong.length < 3) wrong.push(line.slice(0, 200));
  }
  return { items: right.size, lines: lines.length, wrong };
}

/** What the site served during a run: shells (page loads), API calls (pages whose script ran), images. */
function servedSince(site, before) {
  return { shells: site.stats.appPages - before.appPages, apiCalls: site.stats.api - before.api, images: site.stats.images - before.images, notFound: site.stats.other - before.other };
}

/** The figures of one measured process tree, per page of the crawl. */
function treeFigures(tree, pages) {
  return {
    seconds: round(tree.seconds, 2),
    pagesPerSecond: round(pages / tree.seconds, 1),
    cpuSeconds: round(tree.cpuSeconds, 2),
    cpuMsPerPage: round((tree.cpuSeconds * 1000) / pages, 1),
    sampledCpuMsPerPage: round((tree.sampledCpuSeconds * 1000) / pages, 1),
    peakTreeRssMB: tree.peakTreeRssMB,
    peakTreePssMB: tree.peakTreePssMB,
    processes: tree.processes,
    cpuSecondsByProcessKind: tree.cpuSecondsByName,
    processesByKind: tree.processesByName,
    ...(tree.killedStragglers ? { killedStragglers: tree.killedStragglers } : {}),
  };
}

let runNumber = 0;

async function runBaseline(ctx) {
  const n = ++runNumber;
  const job = join(ctx.dir, `job-${n}.json`);
  const out = join(ctx.dir, `items-baseline-${n}.jsonl`);
  writeFileSync(
    job,
    JSON.stringify({
      startUrl: ctx.startUrl,
      concurrency: CONCURRENCY,
      executablePath: flags.chromium,
      block: flags.block,
      fingerprints: flags.fingerprints === 'on',
      retireBrowserAfterPageCount: 100,
      out,
    }),
  );
  const before = { ...ctx.site.stats };
  const tree = await runTreeMeasured(process.execPath, [join(ROOT, 'bench/render-baseline.js'), job], { env: process.env, cwd: ROOT, dir: ctx.dir });
  if (tree.code !== 0) throw new Error(`baseline exited ${tree.code}`);
  const reported = JSON.parse(tree.stdout.trim().split('\n').pop());
  const check = checkItems(out, ctx.expected);
  return { ...treeFigures(tree, ctx.pages), ...check, served: servedSince(ctx.site, before), reported };
}

async function runCrawlfleet(ctx) {
  const { Redis } = await import('ioredis');
  const { dropPrefix, redisCost, snapshot } = await import('./redis-stats.js');
  // a Redis that does not answer fails the run, instead of retrying for ever
  ctx.redis ??= new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1, retryStrategy: (times) => (times > 5 ? null : 200) });
  ctx.redis.on('error', () => undefined); // the command that needed it fails with the reason
  const n = ++runNumber;
  const prefix = `bench-render-${process.pid}-${n}`;
  const spider = join(ctx.dir, `spider-${n}.json`);
  const out = join(ctx.dir, `items-crawlfleet-${n}.jsonl`);
  writeFileSync(spider, JSON.stringify({ ...scriptSiteSpider(ctx.site.url, 'always'), startUrls: [ctx.startUrl] }, null, 2));
  const runEnv = { ...process.env, QUEUE_PREFIX: prefix, LOG_LEVEL: 'warn', METRICS_PORT: '' };
  const redisBefore = await snapshot(ctx.redis);
  const before = { ...ctx.site.stats };
  let tree;
  let redisAfter;
  try {
    tree = await runTreeMeasured(CLI, ['crawl', spider, '--out', out, '--json', '--quiet', '--concurrency', String(CONCURRENCY)], { env: runEnv, cwd: ROOT, dir: ctx.dir });
    redisAfter = await snapshot(ctx.redis);
  } finally {
    await dropPrefix(ctx.redis, prefix); // a failed run's keys go too
  }
  const served = servedSince(ctx.site, before);
  if (tree.code !== 0) throw new Error(`crawlfleet crawl exited ${tree.code} (${served.shells} shells served, ${served.apiCalls} pages rendered)`);
  const status = JSON.parse(tree.stdout.trim().split('\n').pop());
  const check = checkItems(out, ctx.expected);
  const redis = redisCost(redisBefore, redisAfter, ctx.pages, 0);
  delete redis.roundTripsPerPage;
  const figures = treeFigures(tree, ctx.pages);
  return {
    ...figures,
    cpuMsPerPageWithRedis: round(figures.cpuMsPerPage + redis.cpuMsPerPage, 1),
    ...check,
    served,
    reported: { state: status.state, counters: status.counters },
    redis,
  };
}

const MODES = { baseline: runBaseline, crawlfleet: runCrawlfleet };
for (const m of MODE_LIST) if (!MODES[m]) throw new Error(`--modes: unknown mode ${m} (use ${Object.keys(MODES).join(', ')})`);

/** Pure: a run is good when it has the N products, right, and no more lines. */
function problemOf(run, ctx) {
  if (run.items !== PRODUCTS || run.lines !== PRODUCTS) return `${run.items} right items of ${run.lines} lines, expected ${PRODUCTS}${run.wrong.length ? ` (e.g. ${run.wrong[0]})` : ''}`;
  if (run.served.apiCalls < ctx.pages) return `${run.served.apiCalls} pages rendered of ${ctx.pages}`;
  return undefined;
}

const started = performance.now();
const dir = mkdtempSync(join(tmpdir(), 'crawlfleet-bench-render-'));
const site = await startScriptSite({ products: PRODUCTS, perPage: PER_PAGE, apiDelayMs: Number(flags['api-delay']) });
const ctx = {
  dir,
  site,
  startUrl: `${site.url}/app/list/1.html`,
  pages: PRODUCTS + site.pages,
  expected: new Map(products(PRODUCTS).map((p) => [appProduct(p).sku, { title: p.title, price: p.price }])),
};
const results = {
  commit: commit(),
  date: new Date().toISOString(),
  machine: { node: process.version, cores: cpus().length, chromium: chromiumVersion(), loadAverageAtStart: loadavg().map((l) => Number(l.toFixed(2))) },
  site: { products: PRODUCTS, perPage: PER_PAGE, pages: ctx.pages, apiDelayMs: Number(flags['api-delay']) },
  concurrency: CONCURRENCY,
  rounds: ROUNDS,
  baselineSettings: {
    crawler: 'PlaywrightCrawler (@crawlee/playwright 3.18.1, playwright-core)',
    block: flags.block,
    fingerprints: flags.fingerprints,
    retireBrowserAfterPageCount: 100,
    waitFor: '#app[data-ready]',
  },
  crawlfleetSettings: { command: 'crawlfleet crawl --concurrency C', render: 'always' },
  runs: [],
  failures: [],
  medians: {},
};
progress(`script site ${site.url}: ${PRODUCTS} products, ${ctx.pages} app pages; modes ${MODE_LIST.join(', ')}, ${ROUNDS} round(s), concurrency ${CONCURRENCY}`);

function chromiumVersion() {
  try {
    return execFileSync(flags.chromium, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

const given = new Set(); // modes that failed: not run again
try {
  for (let r = 0; r < ROUNDS; r++) {
    for (const mode of roundOrder(MODE_LIST, r)) {
      if (given.has(mode)) continue;
      let run;
      let problem;
      try {
        run = await MODES[mode](ctx);
        problem = problemOf(run, ctx);
      } catch (err) {
        problem = err.message;
      }
      if (problem) {
        progress(`round ${r + 1} ${mode}: FAILED: ${problem}`);
        results.failures.push({ mode, round: r + 1, problem, ...(run ? { run } : {}) });
        // the baseline must work; a crawlfleet failure is reported and its later rounds skipped
        if (mode === 'baseline') throw new Error(`baseline round ${r + 1}: ${problem}`);
        given.add(mode);
        continue;
      }
      results.runs.push({ mode, round: r + 1, ...run });
      progress(
        `round ${r + 1} ${mode}: ${run.seconds} s, ${run.pagesPerSecond} pages/s, CPU ${run.cpuMsPerPage} ms/page (sampled ${run.sampledCpuMsPerPage}), peak RSS ${run.peakTreeRssMB} MB, PSS ${run.peakTreePssMB} MB, ${run.items} items`,
      );
    }
  }
} finally {
  await site.close();
  ctx.redis?.disconnect();
  rmSync(dir, { recursive: true, force: true });
}

/** each figure with the digits its median keeps */
const FIGURES = [
  ['seconds', 2],
  ['pagesPerSecond', 1],
  ['cpuMsPerPage', 1],
  ['sampledCpuMsPerPage', 1],
  ['peakTreeRssMB', 0],
  ['peakTreePssMB', 0],
  ['items', 0],
  ['cpuMsPerPageWithRedis', 1],
];
for (const mode of MODE_LIST) {
  const runs = results.runs.filter((x) => x.mode === mode);
  if (!runs.length) continue;
  const m = { runs: runs.length };
  for (const [f, digits] of FIGURES) if (runs[0][f] !== undefined) m[f] = round(median(runs.map((x) => x[f])), digits);
  if (runs[0].redis) m.redis = { cpuMsPerPage: round(median(runs.map((x) => x.redis.cpuMsPerPage)), 2), commandsPerPage: round(median(runs.map((x) => x.redis.commandsPerPage)), 1) };
  results.medians[mode] = m;
}
const b = results.medians.baseline;
const f = results.medians.crawlfleet;
if (b && f) {
  results.ratioCrawlfleetToBaseline = {
    pagesPerSecond: round(f.pagesPerSecond / b.pagesPerSecond, 2),
    cpuMsPerPage: round(f.cpuMsPerPage / b.cpuMsPerPage, 2),
    cpuMsPerPageWithRedis: round(f.cpuMsPerPageWithRedis / b.cpuMsPerPage, 2),
    peakTreeRssMB: round(f.peakTreeRssMB / b.peakTreeRssMB, 2),
    peakTreePssMB: round(f.peakTreePssMB / b.peakTreePssMB, 2),
  };
}
results.machine.loadAverageAtEnd = loadavg().map((l) => Number(l.toFixed(2)));
results.durationSeconds = Math.round((performance.now() - started) / 1000);
writeFileSync(flags.out, `${JSON.stringify(results, null, 2)}\n`);

// ---- the table ----
const cell = (v) => (v === null || v === undefined ? '-' : String(v));
function rows(headers, lines) {
  const widths = headers.map((h, i) => Math.max(h.length, ...lines.map((l) => cell(l[i]).length)));
  const fmt = (l) => l.map((c, i) => cell(c).padEnd(widths[i])).join('  ');
  return [fmt(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...lines.map(fmt)].join('\n');
}
const headers = ['mode', 'round', 'seconds', 'pages/s', 'CPU ms/page', '(sampled)', 'peak RSS MB', 'peak PSS MB', 'items', 'Redis CPU ms/page'];
const line = (mode, label, x) => [mode, label, x.seconds, x.pagesPerSecond, x.cpuMsPerPage, x.sampledCpuMsPerPage, x.peakTreeRssMB, x.peakTreePssMB, x.items, x.redis?.cpuMsPerPage];
console.log(`\nRender runs (${ctx.pages} pages: ${PRODUCTS} products, ${site.pages} listings; concurrency ${CONCURRENCY}; each crawler's whole process tree, Chromium included):`);
console.log(
  rows(
    headers,
    results.runs.map((x) => line(x.mode, x.round, x)),
  ),
);
console.log('\nMedians:');
console.log(
  rows(
    headers,
    Object.entries(results.medians).map(([mode, m]) => line(mode, `${m.runs} runs`, m)),
  ),
);
if (results.ratioCrawlfleetToBaseline) {
  const x = results.ratioCrawlfleetToBaseline;
  console.log(
    `\ncrawlfleet / baseline: pages/s ×${x.pagesPerSecond}, CPU per page ×${x.cpuMsPerPage} (×${x.cpuMsPerPageWithRedis} with Redis), peak RSS ×${x.peakTreeRssMB}, peak PSS ×${x.peakTreePssMB}`,
  );
}
for (const fail of results.failures) console.log(`\nFAILED: ${fail.mode} round ${fail.round}: ${fail.problem}`);
console.log(`\ncommit ${results.commit}, ${ROUNDS} round(s), ${results.durationSeconds} s in all; written to ${flags.out.replace(ROOT, '')}`);
process.exit(results.failures.length ? 1 : 0);
