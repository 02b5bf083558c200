// npm run bench: crawlfleet against two baselines (a bare got+cheerio loop and Crawlee's
// CheerioCrawler) on real HTML served by a private nginx, the crawlers taking turns in each round,
// every run on a fresh crawl; then Redis bytes per URL at 10^6 URLs, then the writer benchmark.
// Ratios to the bare loop of the same round are the figures to watch: absolute times on a shared
// machine are noise. Progress goes to stderr; the table to stdout; everything to bench/results.json.
//
// Knobs (defaults): BENCH_ROUNDS (3), BENCH_CONCURRENCY (64), BENCH_SITES (multi,single,books),
// BENCH_MODES (bare,crawlee,fleet-1p,fleet-np,fleet-np-mongo; also fleet-1p-code, the spider as a code spider, fleet-1p-warc, with WARC output, and fleet-np-cluster, fleet-np on a
// 3-master Redis Cluster), BENCH_MONGO_SITES (multi: the sites
// fleet-np-mongo runs on), BENCH_MEMORY (1: the 10^6-URL step), BENCH_URLS (1000000), BENCH_WRITER
// (1: the writer benchmark, with BENCH_WRITER_ITEMS, 5000), BENCH_NP_MIXES (1:1:1,1:2:1: the
// fetcher:parser:writer mixes fleet-np tries in round 1; the fastest runs the later rounds),
// BENCH_PROFILE (0; 1: Redis time per script in every run, bench/script-profile.js),
// BENCH_BASELINE_ROOT (none: a built checkout of another commit, for the modes fleet-1p-base and
// fleet-np-base), BENCH_TAIL (1: the long-tail step, bench/long-tail.js, with BENCH_TAIL_SHAPES),
// BENCH_INDEX (0; 1: the seen-URL index at scale, bench/index-scale.js, BENCH_INDEX_URLS 10^7 in
// BENCH_INDEX_STEPS 10 steps; about 10 minutes and 2 GB of Redis).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startSites } from './sites.js';
import { MODES, NP_MIXES, mixName } from './modes.js';
import { benchMemory, freePort } from './memory.js';
import { benchWriter } from './writer.js';
import { benchLongTail } from './long-tail.js';
import { benchIndexScale } from './index-scale.js';
import { medianFigures, perRunFigures, printTable } from './report.js';
import { startRedisCluster } from '../test/fixtures/redis-cluster.mjs';

const ROOT = new URL('..', import.meta.url).pathname;
const knob = (name, fallback) => process.env[name] ?? fallback;
const ROUNDS = Number(knob('BENCH_ROUNDS', 3));
const CONCURRENCY = Number(knob('BENCH_CONCURRENCY', 64));
const SITES = knob('BENCH_SITES', 'multi,single,books').split(',').filter(Boolean);
const MODE_LIST = knob('BENCH_MODES', 'bare,crawlee,fleet-1p,fleet-np,fleet-np-mongo').split(',').filter(Boolean);
const MEMORY = knob('BENCH_MEMORY', '1') === '1';
const TAIL = knob('BENCH_TAIL', '1') === '1';
const INDEX = knob('BENCH_INDEX', '0') === '1';
const URLS = Number(knob('BENCH_URLS', 1_000_000));
/** fleet-np-mongo runs on these sites only (FerretDB is slow to write; multi-host is the one that matters) */
const MONGO_SITES = knob('BENCH_MONGO_SITES', 'multi').split(',');

const progress = (line) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
for (const m of MODE_LIST) if (!MODES[m]) throw new Error(`BENCH_MODES: unknown mode ${m} (use ${Object.keys(MODES).join(', ')})`);

function commit() {
  const head = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no', '--', '.', ':!bench/results.json'], { cwd: ROOT, encoding: 'utf8' }).trim() !== '';
  return dirty ? `${head}+uncommitted` : head;
}

/** Pure: the modes of one round, rotated so each takes each position in turn. */
export const roundOrder = (modes, round) => modes.map((_, i) => modes[(i + round) % modes.length]);

const benchStarted = performance.now();
let clusterStarted;
const dir = mkdtempSync(join(tmpdir(), 'crawlfleet-bench-'));
const port = await freePort();
const { sites, stop } = await startSites({ dir: join(dir, 'nginx'), port, concurrency: CONCURRENCY });
// connected before a site's ground truth is walked: that parse holds the event loop for seconds
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
redis.on('error', (err) => progress(`redis: ${err.message} (retrying)`));
await redis.ping();
const ctx = {
  dir,
  redis,
  concurrency: CONCURRENCY,
  mongoUrl: process.env.MONGO_URL,
  storePid: process.env.BENCH_STORE_PID ? Number(process.env.BENCH_STORE_PID) : undefined,
  npMix: NP_MIXES[0],
  /** the Redis Cluster of fleet-np-cluster, started on first use and stopped at the end */
  cluster() {
    clusterStarted ??= startRedisCluster({ masters: 3, replicasEach: 1 });
    return clusterStarted;
  },
};
const results = {
  commit: commit(),
  date: new Date().toISOString(),
  machine: { node: process.version, cores: cpus().length, loadAverageAtStart: loadavg().map((l) => Number(l.toFixed(2))) },
  concurrency: CONCURRENCY,
  rounds: ROUNDS,
  sites: {},
  npMixTrial: {},
  runs: [],
  medians: {},
};

try {
  for (const name of SITES) {
    const site = sites[name];
    if (!site) throw new Error(`BENCH_SITES: unknown site ${name} (use ${Object.keys(sites).join(', ')})`);
    results.sites[name] = { hosts: site.hosts.length, pages: site.truth.pages, items: site.truth.items, concurrencyPerHost: site.spider.politeness.concurrencyPerHost };
    progress(`site ${name}: ${site.hosts.length} host(s), ${site.truth.pages} pages, ${site.truth.items} items expected`);
    const modes = MODE_LIST.filter((m) => m !== 'fleet-np-mongo' || (MONGO_SITES.includes(name) && ctx.mongoUrl));
    if (MODE_LIST.includes('fleet-np-mongo') && !modes.includes('fleet-np-mongo') && MONGO_SITES.includes(name)) progress('fleet-np-mongo skipped: no MONGO_URL and no FerretDB');
    ctx.npMix = NP_MIXES[0];
    const siteRuns = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (const mode of roundOrder(modes, round)) {
        // The first round of fleet-np tries every mix; the fastest runs the later rounds (and -mongo).
        const mixes = mode === 'fleet-np' && round === 0 ? NP_MIXES : [ctx.npMix];
        for (const mix of mixes) {
          const run = await MODES[mode](site, { ...ctx, npMix: mix });
          const record = { site: name, mode, round: round + 1, ...run };
          if (run.pages !== site.truth.pages || run.items !== site.truth.items) {
            throw new Error(`${name} ${mode} round ${round + 1}: ${run.pages} pages and ${run.items} items, expected ${site.truth.pages} and ${site.truth.items}`);
          }
          siteRuns.push(record);
          progress(
            `${name} round ${round + 1} ${mode}${run.mix ? ` ${run.mix}` : ''}: ${run.seconds.toFixed(1)} s, ${Math.round(run.pages / run.seconds)} pages/s, CPU ${run.processes.reduce((s, p) => s + p.cpuSeconds, 0).toFixed(1)} s`,
          );
        }
        if (mode === 'fleet-np' && round === 0) {
          const trial = siteRuns.filter((r) => r.mode === 'fleet-np' && r.round === 1);
          for (const r of trial) results.npMixTrial[`${name} ${r.mix}`] = Math.round(r.pages / r.seconds);
          const best = trial.reduce((a, b) => (b.pages / b.seconds > a.pages / a.seconds ? b : a));
          ctx.npMix = NP_MIXES.find((m) => mixName(m) === best.mix);
          // only the chosen mix's runs make the median
          for (const r of trial) if (r !== best) r.mode = `fleet-np ${r.mix} (trial)`;
          progress(`${name}: fleet-np mix ${best.mix} chosen`);
        }
      }
    }
    const figures = perRunFigures(siteRuns);
    results.runs.push(...figures);
    results.medians[name] = medianFigures(figures.filter((r) => !r.mode.endsWith('(trial)')));
  }
  if (MEMORY) {
    results.memory = await benchMemory({ dir, urls: URLS, progress });
    progress(`memory: ${JSON.stringify(results.memory)}`);
  }
  if (TAIL) results.longTail = await benchLongTail({ dir, redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', progress });
  if (INDEX) {
    results.indexScale = await benchIndexScale({ dir, urls: Number(knob('BENCH_INDEX_URLS', 10_000_000)), steps: Number(knob('BENCH_INDEX_STEPS', 10)), progress });
    progress(`index at scale: ${JSON.stringify(results.indexScale.extrapolatedTo1e8)} at 10^8`);
  }
  if (process.env.MONGO_URL && knob('BENCH_WRITER', '1') === '1') {
    progress('writer benchmark ...');
    results.writer = await benchWriter(process.env.MONGO_URL);
  }
} finally {
  await stop();
  if (clusterStarted) await (await clusterStarted).stop();
  redis.disconnect();
  rmSync(dir, { recursive: true, force: true });
}
results.machine.loadAverageAtEnd = loadavg().map((l) => Number(l.toFixed(2)));
results.durationSeconds = Math.round((performance.now() - benchStarted) / 1000);
writeFileSync(join(ROOT, 'bench', 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
printTable(results);
console.log(`\ncommit ${results.commit}, ${results.rounds} rounds, concurrency ${CONCURRENCY}, ${results.durationSeconds} s in all; written to bench/results.json`);
