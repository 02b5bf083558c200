// The long tail (issue #18): many hosts, each polite (one request at a time, BENCH_TAIL_DELAY_MS,
// 2 s, apart), every page linking to all of its host's pages. A host's pages take pages x delay
// however many hosts there are, so that is the ideal; the figure is the crawl's time over it, in one
// process (fleet-1p) and as separate processes (fleet-np, 1 fetcher + 1 parser + 1 writer), for
// 200 hosts x 30 pages and 1,000 hosts x 10 pages (BENCH_TAIL_SHAPES, hosts x pages, comma-separated).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { longTailSpider, resolveToLoopback, startLongTailSite, tailHosts } from '../test/fixtures/long-tail-site.mjs';
import { hostStats } from '../test/fixtures/polite-site.mjs';
import { Redis } from 'ioredis';
import { runMeasured, startMeasured } from './processes.js';
import { dropPrefix } from './redis-stats.js';

const ROOT = new URL('..', import.meta.url).pathname;
const CLI = join(ROOT, 'bin/crawlfleet');

export const TAIL_SHAPES = (process.env.BENCH_TAIL_SHAPES ?? '200x30,1000x10').split(',').map((s) => {
  const [hosts, pages] = s.split('x').map(Number);
  if (!(hosts >= 1 && pages >= 1)) throw new Error(`BENCH_TAIL_SHAPES: "${s}" is not HOSTSxPAGES`);
  return { hosts, pages };
});
const DELAY_MS = Number(process.env.BENCH_TAIL_DELAY_MS ?? 2000);

async function runShape({ hosts: hostCount, pages }, mode, { dir, redisUrl, progress }) {
  const site = await startLongTailSite({ pages });
  const hosts = tailHosts(hostCount);
  const prefix = `bench-tail-${process.pid}-${mode}-${hostCount}`;
  const env = { ...process.env, REDIS_URL: redisUrl, QUEUE_PREFIX: prefix, LOG_LEVEL: 'warn', HOST_RESOLVE: resolveToLoopback(hosts), METRICS_PORT: '' };
  const spider = join(dir, `tail-${hostCount}.json`);
  writeFileSync(spider, JSON.stringify(longTailSpider(hosts, site.port, { delayMs: DELAY_MS })));
  const out = join(dir, `tail-${mode}-${hostCount}.jsonl`);
  const options = { env, dir };
  const started = performance.now();
  let status;
  try {
    if (mode === 'fleet-1p') {
      const run = await runMeasured('crawl', CLI, ['crawl', spider, '--crawl-id', 'tail', '--out', out, '--json', '--quiet', '--concurrency', '64'], options);
      status = JSON.parse(run.stdout.trim().split('\n').pop());
    } else {
      const workers = ['fetcher', 'parser', 'writer'].map((stage) => startMeasured(stage, CLI, ['worker', stage, ...(stage === 'fetcher' ? ['--concurrency', '64'] : [])], options));
      try {
        await runMeasured('seed', CLI, ['seed', spider, '--crawl-id', 'tail', '--sink', out], options);
        await runMeasured('wait', CLI, ['wait', '--crawl-id', 'tail'], options);
      } finally {
        for (const w of workers) w.stop();
        await Promise.all(workers.map((w) => w.exited));
      }
      status = JSON.parse((await runMeasured('status', CLI, ['status', '--crawl-id', 'tail', '--json'], options)).stdout);
    }
    const seconds = (performance.now() - started) / 1000;
    const ideal = (pages * DELAY_MS) / 1000;
    const perHost = hosts.map((h) => hostStats(site.requests, h));
    const result = {
      shape: `${hostCount}x${pages}`,
      mode,
      seconds: Number(seconds.toFixed(1)),
      idealSeconds: ideal,
      ratioToIdeal: Number((seconds / ideal).toFixed(2)),
      pages: status.counters.fetched,
      deferred: status.counters.deferred,
      mostInFlightOnOneHost: Math.max(...perHost.map((s) => s.maxConcurrent)),
      smallestGapMs: Math.min(...perHost.map((s) => s.minGapMs)),
    };
    if (result.pages !== hostCount * pages) throw new Error(`long tail ${result.shape} ${mode}: ${result.pages} pages fetched, expected ${hostCount * pages}`);
    progress(`long tail ${result.shape} ${mode}: ${result.seconds} s, ${result.ratioToIdeal}x the ideal ${ideal} s, ${result.deferred} deferrals`);
    return result;
  } finally {
    await site.close();
    const redis = new Redis(redisUrl);
    await dropPrefix(redis, prefix).finally(() => redis.disconnect());
  }
}

export async function benchLongTail({ dir, redisUrl, progress, modes = ['fleet-1p', 'fleet-np'] }) {
  const runs = [];
  for (const shape of TAIL_SHAPES) for (const mode of modes) runs.push(await runShape(shape, mode, { dir, redisUrl, progress }));
  return { delayMs: DELAY_MS, runs };
}
