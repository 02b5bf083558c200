// One run of one crawler on one site, on a fresh crawl: wall time from the first process started
// to the crawl's end, the pages and items it reports, and every process's CPU and peak RSS.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { extractorName } from './sites.js';
import { runMeasured, startMeasured, cpuSecondsOf } from './processes.js';
import { dropPrefix, redisCost, snapshot } from './redis-stats.js';
import { startScriptProfile, stopScriptProfile } from './script-profile.js';

/** BENCH_PROFILE=1: Redis time per script in every run on the bench's Redis (script-profile.js). */
const PROFILE = process.env.BENCH_PROFILE === '1';
import { commandsPerMaster, spread } from '../test/fixtures/redis-cluster.mjs';

const ROOT = new URL('..', import.meta.url).pathname;
const CLI = join(ROOT, 'bin/crawlfleet');
/**
 * BENCH_BASELINE_ROOT: another checkout of crawlfleet, built (an older commit): its modes
 * fleet-1p-base and fleet-np-base run its CLI in the same rounds, for a comparison side by side.
 */
const BASE_CLI = process.env.BENCH_BASELINE_ROOT ? join(process.env.BENCH_BASELINE_ROOT, 'bin/crawlfleet') : undefined;
let runNumber = 0;

/** The process mixes fleet-np tries, BENCH_NP_MIXES as fetchers:parsers:writers (default 1:1:1,1:2:1). */
export const NP_MIXES = (process.env.BENCH_NP_MIXES ?? '1:1:1,1:2:1').split(',').map((m) => {
  const [fetchers, parsers, writers] = m.split(':').map(Number);
  if (!(fetchers >= 1 && parsers >= 1 && writers >= 1)) throw new Error(`BENCH_NP_MIXES: "${m}" is not fetchers:parsers:writers`);
  return { fetchers, parsers, writers };
});
/** Pure: a mix's fetchers and parsers as fetchers that parse (PARSE_IN_FETCHER), with its writers. */
export const fusedMix = (m) => ({ fetchers: Math.max(m.fetchers, m.parsers), parsers: 0, writers: m.writers });
export const mixName = (m) => `${m.fetchers}f+${m.parsers}p+${m.writers}w`;

async function baseline(kind, site, ctx) {
  const job = join(ctx.dir, `job-${kind}.json`);
  writeFileSync(job, JSON.stringify({ startUrls: site.startUrls, extractor: extractorName(site), concurrency: ctx.concurrency, out: join(ctx.dir, `items-${kind}.jsonl`) }));
  const started = performance.now();
  const proc = await runMeasured(kind, process.execPath, [join(ROOT, 'bench/baseline.js'), kind, job], { env: process.env, dir: ctx.dir });
  const seconds = (performance.now() - started) / 1000;
  const { pages, items } = JSON.parse(proc.stdout.trim().split('\n').pop());
  return { seconds, pages, items, processes: [proc] };
}

/** Every crawlfleet process of a run counts its Redis requests into one file (count-redis-requests.cjs). */
function fleetEnv(ctx, prefix, extra = {}) {
  const preload = `--require ${join(ROOT, 'bench/count-redis-requests.cjs')}`;
  return {
    ...process.env,
    QUEUE_PREFIX: prefix,
    LOG_LEVEL: 'warn',
    METRICS_PORT: '',
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} ${preload}`.trim(),
    BENCH_REDIS_PORT: String(ctx.redis.options.port),
    BENCH_REDIS_REQUESTS_FILE: join(ctx.dir, `requests-${prefix}.txt`),
    ...extra,
  };
}

/** Pure over the file: the requests all processes of a run sent to Redis. */
function requestsSent(env) {
  if (!existsSync(env.BENCH_REDIS_REQUESTS_FILE)) return 0;
  return readFileSync(env.BENCH_REDIS_REQUESTS_FILE, 'utf8')
    .trim()
    .split('\n')
    .reduce((sum, line) => sum + Number(line.split(' ')[1]), 0);
}

/**
 * The site's spider as a code spider: the same settings, plus a parse hook that reads the page (its
 * title) and an item hook that returns each item. They add nothing, so the items are the JSON
 * spider's; what the run costs beyond fleet-1p is the hook path (module load, hooks, item checks).
 */
function writeCodeSpider(site, path) {
  writeFileSync(
    path,
    `import { defineSpider } from '@crawlfleet/sdk';\nexport default defineSpider({ ...${JSON.stringify(site.spider)}, *parse(page) { page.$('title').text(); }, item(item) { return item; } });\n`,
  );
}

async function fleet1p(site, ctx, code = false, cli = CLI, warc = false, extraEnv = {}) {
  const prefix = `bench-${process.pid}-${++runNumber}`;
  const spider = join(ctx.dir, `spider-${prefix}.${code ? 'mjs' : 'json'}`);
  if (code) writeCodeSpider(site, spider);
  else writeFileSync(spider, JSON.stringify(site.spider));
  const before = await snapshot(ctx.redis);
  if (PROFILE) await startScriptProfile(ctx.redis);
  const started = performance.now();
  const env = fleetEnv(ctx, prefix, extraEnv);
  const warcArgs = warc ? ['--warc', join(ctx.dir, `warc-${prefix}`)] : [];
  const proc = await runMeasured('crawl', cli, ['crawl', spider, '--out', join(ctx.dir, `items-${prefix}.jsonl`), '--json', '--quiet', '--concurrency', String(ctx.concurrency), ...warcArgs], {
    env,
    dir: ctx.dir,
  });
  const seconds = (performance.now() - started) / 1000;
  const after = await snapshot(ctx.redis);
  const profile = PROFILE ? await stopScriptProfile(ctx.redis) : undefined;
  const status = JSON.parse(proc.stdout.trim().split('\n').pop());
  const pages = status.counters.fetched;
  const scripts = profile?.perPage(pages);
  await dropPrefix(ctx.redis, prefix);
  return { seconds, pages, items: status.counters.written, processes: [proc], redis: { ...redisCost(before, after, pages, requestsSent(env)), ...(scripts ? { scripts } : {}) } };
}

/**
 * The stages as separate processes, as a fleet runs them: the workers and `seed` start together
 * (start-up included, as for `crawl`), `wait` follows the seed and returns when the crawl is done;
 * then the workers get SIGTERM and finish. With `mongo`, the writer writes to a MongoDB database
 * of its own and the items are counted there.
 */
async function fleetNp(site, ctx, mix, mongo, cluster = false, cli = CLI, extraEnv = {}) {
  const prefix = `bench-${process.pid}-${++runNumber}`;
  const crawlId = `bench-${runNumber}`;
  const spider = join(ctx.dir, `spider-${prefix}.json`);
  writeFileSync(spider, JSON.stringify(site.spider));
  const mongoUrl = mongo ? ctx.mongoUrl.replace(/\/[^/?]*(\?|$)/, `/bench_np_${process.pid}_${runNumber}$1`) : undefined;
  // On the cluster, Redis's own figures (INFO, requests per port) are not comparable: time and CPU only.
  const redisUrl = cluster ? { REDIS_URL: (await ctx.cluster()).url } : {};
  const env = fleetEnv(ctx, prefix, { ...(mongoUrl ? { MONGO_URL: mongoUrl } : {}), ...redisUrl, ...extraEnv });
  // the same requests in flight for the whole fleet, however many fetchers share them
  const perFetcher = String(Math.max(1, Math.round(ctx.concurrency / mix.fetchers)));
  const options = { env, dir: ctx.dir };
  const sink = mongo ? 'mongo' : join(ctx.dir, `items-${prefix}.jsonl`);
  const before = cluster ? undefined : await snapshot(ctx.redis);
  if (PROFILE && !cluster) await startScriptProfile(ctx.redis);
  const shardsBefore = cluster ? await commandsPerMaster(await ctx.cluster()) : undefined;
  const storeCpuBefore = ctx.storePid ? cpuSecondsOf(ctx.storePid) : 0;
  const started = performance.now();
  const workers = [
    ...Array.from({ length: mix.fetchers }, (_, i) => startMeasured(`fetcher${i + 1}`, cli, ['worker', 'fetcher', '--concurrency', perFetcher], options)),
    ...Array.from({ length: mix.parsers }, (_, i) => startMeasured(`parser${i + 1}`, cli, ['worker', 'parser'], options)),
    ...Array.from({ length: mix.writers }, (_, i) => startMeasured(`writer${i + 1}`, cli, ['worker', 'writer'], options)),
  ];
  let seed, wait, seconds, after, storeCpu, profile;
  const result0 = {};
  try {
    seed = await runMeasured('seed', cli, ['seed', spider, '--crawl-id', crawlId, '--sink', sink], options);
    wait = await runMeasured('wait', cli, ['wait', '--crawl-id', crawlId], options);
    seconds = (performance.now() - started) / 1000;
    // before the workers shut down: their goodbyes are not the crawl's cost
    after = cluster ? undefined : await snapshot(ctx.redis);
    if (PROFILE && !cluster) profile = await stopScriptProfile(ctx.redis);
    if (cluster) result0.shards = spread(shardsBefore, await commandsPerMaster(await ctx.cluster()));
    storeCpu = ctx.storePid ? cpuSecondsOf(ctx.storePid) - storeCpuBefore : undefined;
  } finally {
    for (const w of workers) w.stop();
  }
  const procs = await Promise.all(workers.map((w) => w.exited));
  const bad = procs.find((p) => p.code !== 0);
  if (bad) throw new Error(`${bad.role} exited ${bad.code}`);
  const requests = requestsSent(env);
  const status = JSON.parse((await runMeasured('status', cli, ['status', '--crawl-id', crawlId, '--json'], options)).stdout);
  const pages = status.counters.fetched;
  const scripts = profile?.perPage(pages);
  if (!cluster) await dropPrefix(ctx.redis, prefix);
  const result = {
    seconds,
    pages,
    items: status.counters.written,
    processes: [seed, ...procs, wait],
    redis: cluster ? null : { ...redisCost(before, after, pages, requests), ...(scripts ? { scripts } : {}) },
    mix: mixName(mix),
    ...result0,
  };
  if (mongoUrl) {
    const client = await MongoClient.connect(mongoUrl);
    try {
      const db = client.db();
      const collections = await db.listCollections().toArray();
      let stored = 0;
      for (const c of collections) if (!c.name.startsWith('system.')) stored += await db.collection(c.name).countDocuments();
      await db.dropDatabase();
      result.items = stored;
      result.storeItemsPerSecond = Math.round(stored / seconds);
      if (storeCpu !== undefined) result.storeCpuSecondsPer1000Pages = Number(((storeCpu * 1000) / pages).toFixed(2));
    } finally {
      await client.close();
    }
  }
  return result;
}

/** mode name -> run(site, ctx); fleet-np takes its mix from ctx.npMix. */
export const MODES = {
  bare: (site, ctx) => baseline('bare', site, ctx),
  crawlee: (site, ctx) => baseline('crawlee', site, ctx),
  'fleet-1p': (site, ctx) => fleet1p(site, ctx, false),
  // fleet-1p with PARSE_IN_FETCHER=1
  'fleet-1p-fused': (site, ctx) => fleet1p(site, ctx, false, CLI, false, { PARSE_IN_FETCHER: '1' }),
  'fleet-1p-code': (site, ctx) => fleet1p(site, ctx, true),
  // fleet-1p with WARC output (--warc): what archiving every exchange costs per page
  'fleet-1p-warc': (site, ctx) => fleet1p(site, ctx, false, CLI, true),
  'fleet-np': (site, ctx) => fleetNp(site, ctx, ctx.npMix, false),
  // fleet-np with PARSE_IN_FETCHER=1: the parsers' processes become fetchers that parse, no parse job
  'fleet-np-fused': (site, ctx) => fleetNp(site, ctx, fusedMix(ctx.npMix), false, false, CLI, { PARSE_IN_FETCHER: '1' }),
  'fleet-np-mongo': (site, ctx) => fleetNp(site, ctx, ctx.npMix, true),
  // the same fleet on a Redis Cluster of 3 masters and 3 replicas (test/fixtures/redis-cluster.mjs)
  'fleet-np-cluster': (site, ctx) => fleetNp(site, ctx, ctx.npMix, false, true),
  // the same as fleet-1p and fleet-np with BENCH_BASELINE_ROOT's CLI (an older commit, for comparison)
  'fleet-1p-base': (site, ctx) => fleet1p(site, ctx, false, requireBase()),
  'fleet-np-base': (site, ctx) => fleetNp(site, ctx, ctx.npMix, false, false, requireBase()),
};

function requireBase() {
  if (!BASE_CLI) throw new Error('the -base modes need BENCH_BASELINE_ROOT: a built checkout of the commit to compare with');
  return BASE_CLI;
}
