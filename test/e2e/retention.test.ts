import { join } from 'node:path';
import { Redis } from 'ioredis';
import { loadEnv, validateSpider } from '@crawlfleet/core';
import { createFleetContext } from '@crawlfleet/runtime';
import { seedCrawl } from '@crawlfleet/seeder';
import { startServer } from '../fixtures/http-server.mjs';
import { startRedisCluster } from '../fixtures/redis-cluster.mjs';
import { REDIS_URL, dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';
import { freePort, waitForPort } from '../helpers/ports.js';

/**
 * Retention (issue #19, point 7): finished crawls past the retention leave Redis, all but a small
 * summary that `status` still shows. The fleet runs as separate processes on a real Redis; 200
 * finished crawls are real crawls of a tiny local site (one by `crawl`, one seeded by `seed`, one
 * cancelled by `cancel`, the rest seeded with the seeder's own code) run by the fleet's workers.
 */

const FINISHED = 200;
const PAGE = (title: string, links: string[] = []) => `<html><head><title>${title}</title></head><body><h1>${title}</h1>${links.map((l) => `<a href="${l}">${l}</a>`).join('')}</body></html>`;

/** The tiny site: a home page with two pages and a missing one (a dead letter), and a slow corner of five pages. */
function tinySite() {
  return startServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const pages: Record<string, string> = {
      '/index.html': PAGE('Home', ['/a.html', '/b.html', '/missing.html']),
      '/a.html': PAGE('Page A'),
      '/b.html': PAGE('Page B'),
      '/slow/index.html': PAGE('Slow', ['1.html', '2.html', '3.html', '4.html', '5.html']),
    };
    const body = pages[path] ?? (path.startsWith('/slow/') ? PAGE(`Slow ${path}`) : undefined);
    if (body === undefined) res.writeHead(404, { 'content-type': 'text/html' }).end('<html><body>404</body></html>');
    else res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(body);
  });
}

function tinySpider(base: string, extra: Record<string, unknown> = {}) {
  return {
    name: 'tiny',
    startUrls: [`${base}/index.html`],
    obeyRobotsTxt: false,
    allowPrivateAddresses: true,
    follow: [{ css: 'a' }],
    items: [{ type: 'page', fields: { title: { css: 'h1' } } }],
    ...extra,
  };
}

/** A crawl that stays running for minutes: its host allows one request every 10 minutes (fleet-wide). */
function slowSpider(base: string, name: string) {
  return tinySpider(base, { name, startUrls: [`${base}/slow/index.html`], politeness: { delayPerHost: 600_000 } });
}

interface MemoryReading {
  usedMemory: number;
  /** the connections' buffers (mem_clients_normal): they follow the clients' last commands, not what Redis holds */
  clients: number;
  /** Redis's script cache (used_memory_scripts): the scripts of the code, cached at their first call */
  scripts: number;
  /** used_memory without those two: what Redis holds */
  stored: number;
  keys: number;
}

/** used_memory once lazy frees are done and the keyspace's tables have shrunk: the reading with the median used_memory of five. */
async function usedMemory(redis: Redis): Promise<MemoryReading> {
  await waitFor(async () => /lazyfree_pending_objects:0\b/.test(await redis.info('memory')), 10_000, 'lazy frees');
  await new Promise((r) => setTimeout(r, 1500));
  const samples: { usedMemory: number; clients: number; scripts: number }[] = [];
  for (let i = 0; i < 5; i++) {
    const info = await redis.info('memory');
    const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)![1]);
    samples.push({ usedMemory: field('used_memory'), clients: field('mem_clients_normal'), scripts: field('used_memory_scripts') });
    await new Promise((r) => setTimeout(r, 100));
  }
  const median = samples.sort((a, b) => a.usedMemory - b.usedMemory)[2]!;
  return { ...median, stored: median.usedMemory - median.clients - median.scripts, keys: await redis.dbsize() };
}

/** Every key under a prefix, by SCAN. */
async function keysOf(redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  return found.sort();
}

/** The crawl ids that a key belongs to: its crawl hash tag's, or a BullMQ job's payload's. */
async function crawlsOfKeys(redis: Redis, keys: string[]): Promise<Map<string, string[]>> {
  const byCrawl = new Map<string, string[]>();
  const add = (id: string, key: string) => byCrawl.set(id, [...(byCrawl.get(id) ?? []), key]);
  for (const key of keys) {
    const tag = /:crawl:\{([^}/]+)(?:\/[^}]*)?\}:/.exec(key);
    if (tag) {
      add(tag[1]!, key);
      continue;
    }
    if ((await redis.type(key)) !== 'hash') continue;
    const data = await redis.hget(key, 'data');
    const crawlId = data?.startsWith('{') ? (JSON.parse(data) as { crawlId?: string }).crawlId : undefined;
    if (crawlId) add(crawlId, key);
  }
  return byCrawl;
}

const metricLabels = (text: string, metric: string) => new Set([...text.matchAll(new RegExp(`^${metric}\\{[^}]*crawl="([^"]+)"`, 'gm'))].map((m) => m[1]!));

describe('retention: gc collects finished crawls past the retention, leaving a summary', () => {
  const prefix = uniquePrefix('gc');
  const dir = tempDir('retention');
  const processes: ReturnType<typeof spawnCli>[] = [];
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 3 });
  let latencyTracking: string | undefined;
  afterAll(async () => {
    for (const p of processes) if (p.exitCode === null) p.kill('SIGTERM');
    await Promise.all(processes.map((p) => p.result));
    await dropPrefix(prefix);
    if (latencyTracking) await redis.config('SET', 'latency-tracking', latencyTracking);
    redis.disconnect();
  });
  const states = async (ids: string[]) => {
    const pipe = redis.pipeline();
    for (const id of ids) pipe.hmget(`${prefix}:crawl:{${id}}:meta`, 'state', 'finishedAt');
    return ((await pipe.exec()) ?? []).map(([, v]) => v as [string | null, string | null]);
  };
  /** Bytes of the keys named, exactly (every element counted). */
  const bytesOf = async (names: string[]) => (await Promise.all(names.map((k) => redis.call('MEMORY', 'USAGE', k, 'SAMPLES', '0')))).reduce((n: number, b) => n + Number(b ?? 0), 0);

  test(`${FINISHED} finished crawls: gc brings used_memory back to the empty fleet's, status keeps their counters, metrics only the live crawls`, async () => {
    const site = await tinySite();
    const slowBase = `http://slow.test:${site.port}`;
    const dashboardPort = await freePort();
    const env = testEnv(prefix, {
      HOST_RESOLVE: 'slow.test:127.0.0.1',
      RECONCILE_INTERVAL_MS: '1000',
      METRICS_FINISHED_SECONDS: '2',
      LOG_LEVEL: 'warn',
    });
    try {
      // The fleet: workers (each stage its own process) and the dashboard, no crawl yet.
      for (const stage of ['fetcher', 'parser', 'writer'] as const) processes.push(spawnCli(['worker', stage, '--concurrency', stage === 'fetcher' ? '32' : '16'], { env }));
      processes.push(spawnCli(['dashboard', '--port', String(dashboardPort)], { env }));
      await waitForPort(dashboardPort, 120_000, 'dashboard');
      await new Promise((r) => setTimeout(r, 2000));
      const coldFleet = await usedMemory(redis);

      // Redis keeps a latency histogram per command name, made at the command's first call (24.7 KB
      // each on Redis 7.0): a fixed cost of the commands the fleet and this test use, not of crawls.
      // It is off while we measure. The empty fleet has run crawls before (a tiny one, and a slow one
      // cancelled, both collected and reset): Redis's script cache holds the scripts the fleet uses
      // (a fixed cost of the code), and no crawl's state is left.
      latencyTracking = ((await redis.config('GET', 'latency-tracking')) as string[])[1];
      await redis.config('SET', 'latency-tracking', 'no');
      const spiderFile = writeJson(dir, 'tiny.json', tinySpider(site.url));
      const slowFile = (name: string) => writeJson(dir, `${name}.json`, slowSpider(slowBase, name));
      expect((await runCli(['seed', spiderFile, '--crawl-id', 'warm-up', '--sink', join(dir, 'warm-up.jsonl')], { env })).code).toBe(0);
      expect((await runCli(['seed', slowFile('warmslow'), '--crawl-id', 'warm-slow', '--sink', join(dir, 'warm-slow.jsonl')], { env })).code).toBe(0);
      await waitFor(async () => (await redis.hget(`${prefix}:crawl:{warm-slow/0.0}:counters`, 'fetched')) === '1', 20_000, 'the slow crawl to fetch its first page');
      expect((await runCli(['cancel', '--crawl-id', 'warm-slow'], { env })).code).toBe(0);
      expect((await runCli(['wait', '--crawl-id', 'warm-up', '--timeout', '60'], { env, timeoutMs: 70_000 })).code).toBe(0);
      expect((await runCli(['gc', '--finished-before', '0s'], { env })).code).toBe(0);
      for (const id of ['warm-up', 'warm-slow']) expect((await runCli(['reset', '--crawl-id', id], { env })).code).toBe(0);
      expect((await keysOf(redis, prefix)).filter((k) => k.includes(':crawl'))).toEqual([]);
      await (await fetch(`http://127.0.0.1:${dashboardPort}/metrics`)).text();
      const empty = await usedMemory(redis);
      // A crawl that keeps running through the test, and one cancelled while it waits for its host.
      const running = 'live-running';
      expect((await runCli(['seed', slowFile('slow'), '--crawl-id', running, '--sink', join(dir, 'running.jsonl')], { env })).code).toBe(0);
      const cancelled = 'old-cancelled';
      expect((await runCli(['seed', slowFile('slow2'), '--crawl-id', cancelled, '--sink', join(dir, 'cancelled.jsonl')], { env })).code).toBe(0);
      expect((await runCli(['cancel', '--crawl-id', cancelled], { env })).code).toBe(0);

      // The finished crawls: one by `crawl` (all stages in its own process, beside the fleet), one
      // seeded by `seed`, the rest seeded with the seeder's code; the fleet's workers run them.
      const finished = [cancelled];
      const crawled = await runCli(['crawl', spiderFile, '--crawl-id', 'old-crawl', '--out', join(dir, 'old-crawl.jsonl'), '--quiet'], { env, timeoutMs: 60_000 });
      expect(crawled.code).toBe(0);
      finished.push('old-crawl');
      expect((await runCli(['seed', spiderFile, '--crawl-id', 'old-seed', '--sink', join(dir, 'old-seed.jsonl')], { env })).code).toBe(0);
      finished.push('old-seed');
      const ctx = await createFleetContext({ env: loadEnv(env), name: 'retention-test' });
      try {
        const spider = validateSpider(tinySpider(site.url), 'tiny spider');
        const ids = Array.from({ length: FINISHED - finished.length }, (_, i) => `old-${String(i).padStart(3, '0')}`);
        for (let i = 0; i < ids.length; i += 10) {
          await Promise.all(ids.slice(i, i + 10).map((crawlId) => seedCrawl(ctx, { spider, crawlId, sink: () => ({ kind: 'jsonl', path: join(dir, `${crawlId}.jsonl`) }) })));
        }
        finished.push(...ids);
      } finally {
        await ctx.close();
      }
      expect(finished).toHaveLength(FINISHED);
      await waitFor(async () => (await states(finished)).every(([s]) => s === 'done' || s === 'cancelled'), 90_000, `${FINISHED} crawls to finish`);
      expect(readJsonl(join(dir, 'old-000.jsonl'))).toHaveLength(3);
      const withCrawls = await usedMemory(redis);

      // A recent crawl, finished after the cutoff below; the 200 finished before it.
      const lastOld = Math.max(...(await states(finished)).map(([, at]) => Date.parse(at!)));
      await new Promise((r) => setTimeout(r, 1200));
      const recent = 'recent-done';
      expect((await runCli(['seed', spiderFile, '--crawl-id', recent, '--sink', join(dir, 'recent.jsonl')], { env })).code).toBe(0);
      expect((await runCli(['wait', '--crawl-id', recent, '--timeout', '60'], { env, timeoutMs: 70_000 })).code).toBe(0);
      const [[, recentFinishedAt]] = (await states([recent])) as [[string, string]];
      const cutoff = new Date((lastOld + Date.parse(recentFinishedAt)) / 2).toISOString();
      expect(Date.parse(cutoff)).toBeGreaterThan(lastOld);

      const statusList = async () =>
        JSON.parse((await runCli(['status', '--json'], { env })).stdout) as {
          crawlId: string;
          state: string;
          counters: Record<string, number>;
          collected?: { at: string; sink: string; items: number };
        }[];
      const before = new Map((await statusList()).map((s) => [s.crawlId, s]));
      expect(before.size).toBe(FINISHED + 2);
      const liveKeysBefore = await keysOf(redis, prefix).then((k) => crawlsOfKeys(redis, k));

      // Usage errors exit 2; a dry run changes nothing.
      expect((await runCli(['gc', '--finished-before', 'soon'], { env })).code).toBe(2);
      const oldKeys = async () => (await keysOf(redis, prefix)).filter((k) => k.includes(':crawl:{old-'));
      const keysBeforeDry = await oldKeys();
      const dry = await runCli(['gc', '--dry-run', '--finished-before', cutoff], { env });
      expect(dry.code).toBe(0);
      expect(dry.stdout).toMatch(new RegExp(`\\b${FINISHED} crawls\\b`));
      expect(dry.stdout).toContain('old-seed');
      expect(dry.stdout).not.toContain(recent);
      expect(await oldKeys()).toEqual(keysBeforeDry);
      const none = await runCli(['gc', '--dry-run', '--finished-before', '1h'], { env });
      expect(none.code).toBe(0);
      expect(none.stdout).toMatch(/\b0 crawls\b/);

      const gc = await runCli(['gc', '--finished-before', cutoff], { env, timeoutMs: 60_000 });
      expect({ code: gc.code, stderr: gc.stderr.slice(-2000) }).toEqual({ code: 0, stderr: expect.anything() });
      expect(gc.stdout).toMatch(new RegExp(`collected ${FINISHED} crawls`));

      // Nothing of the collected crawls is left but their summaries: no key of theirs in any
      // partition, no BullMQ job (their dead letters' failed jobs included).
      const after = await usedMemory(redis);
      const allKeys = await keysOf(redis, prefix);
      const byCrawl = await crawlsOfKeys(redis, allKeys);
      for (const id of finished) expect({ id, keys: byCrawl.get(id) }).toEqual({ id, keys: [`${prefix}:crawl:{${id}}:meta`] });
      const summaryBytes = await bytesOf([...finished.map((id) => `${prefix}:crawl:{${id}}:meta`), `${prefix}:crawls:collected`]);
      // The two crawls gc must keep are not part of the empty fleet either.
      const keptBytes = await bytesOf([...(byCrawl.get(running) ?? []), ...(byCrawl.get(recent) ?? []), `${prefix}:crawls`]);
      const report = { coldFleet: coldFleet.usedMemory, emptyFleet: empty, with200Crawls: withCrawls, afterGc: after, summaryBytes, perSummary: Math.round(summaryBytes / FINISHED), keptBytes };
      console.log(`retention: used_memory ${JSON.stringify(report)}`);
      expect(summaryBytes / FINISHED).toBeLessThan(600);
      // What Redis holds (its connections' buffers and its script cache aside) is back within 8% of
      // the empty fleet's, beyond the summaries and the two crawls kept. Five CI runs read 2.2% to
      // 5.2% above (Redis's own bookkeeping moves by tens of kilobytes between runs); a leak of
      // 1 KB per collected crawl would read 13%, and the 200 crawls themselves read 137%.
      expect(after.stored - summaryBytes - keptBytes).toBeLessThanOrEqual(empty.stored * 1.08);
      expect(withCrawls.stored).toBeGreaterThan(empty.stored * 1.5);

      // The running crawl and the recent one are untouched.
      for (const id of [running, recent]) expect({ id, keys: byCrawl.get(id) }).toEqual({ id, keys: liveKeysBefore.get(id) });
      const statusAfter = new Map((await statusList()).map((s) => [s.crawlId, s]));
      expect(statusAfter.get(running)).toMatchObject({ state: 'running', counters: before.get(running)!.counters });
      expect(statusAfter.get(running)!.collected).toBeUndefined();
      expect(statusAfter.get(recent)).toEqual(before.get(recent));

      // The list still shows every crawl; a collected one keeps its final state and counters.
      expect(statusAfter.size).toBe(FINISHED + 2);
      for (const id of finished) {
        const s = statusAfter.get(id)!;
        expect({ id, state: s.state, counters: s.counters }).toEqual({ id, state: before.get(id)!.state, counters: before.get(id)!.counters });
        expect(s.collected?.at).toEqual(expect.any(String));
      }
      const one = JSON.parse((await runCli(['status', '--crawl-id', 'old-seed', '--json'], { env })).stdout);
      expect(one).toMatchObject({ crawlId: 'old-seed', state: 'done', counters: { seen: 4, fetched: 4, parsed: 3, items: 3, written: 3, failed: 1 } });
      expect(one.collected).toMatchObject({ items: 3, sink: expect.stringContaining(join(dir, 'old-seed.jsonl')) });
      const text = await runCli(['status', '--crawl-id', 'old-seed'], { env });
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(/old-seed \(tiny\): done.*collected/);
      expect(text.stdout).toContain('seen 4  fetched 4  parsed 3  items 3  written 3');
      expect(text.stdout).toContain('failed 1');

      // The metrics carry the running crawl only: not the collected ones, not the recent one past the window.
      const metrics = await (await fetch(`http://127.0.0.1:${dashboardPort}/metrics`)).text();
      expect(metricLabels(metrics, 'crawlfleet_crawl_seen_total')).toEqual(new Set([running]));
      expect(metricLabels(metrics, 'crawlfleet_crawl_running')).toEqual(new Set([running]));

      // A collected crawl cannot be seeded again by mistake (its index is gone); reset forgets it.
      const again = await runCli(['seed', spiderFile, '--crawl-id', 'old-001', '--sink', join(dir, 'again.jsonl')], { env });
      expect(again.code).toBe(2);
      expect(again.stderr).toMatch(/collected/);
      expect((await runCli(['reset', '--crawl-id', 'old-001'], { env })).code).toBe(0);
      expect((await runCli(['status', '--crawl-id', 'old-001'], { env })).code).toBe(2);

      // Without an operator: the fleet's workers collect in their reconciler's round. The fleet is
      // restarted with a retention the recent crawl has passed (CRAWL_RETENTION is a setting of the
      // whole fleet: whichever worker holds the round's lock applies its own); the running crawl stays.
      const workers = processes.filter((p) => p.spawnargs.includes('worker'));
      for (const w of workers) w.kill('SIGTERM');
      expect((await Promise.all(workers.map((w) => w.result))).map((r) => r.code)).toEqual(workers.map(() => 0));
      const collector = spawnCli(['worker', 'writer'], { env: { ...env, CRAWL_RETENTION: '1s', RECONCILE_INTERVAL_MS: '500' } });
      processes.push(collector);
      let collectorLog = '';
      collector.stderr!.on('data', (d: Buffer) => (collectorLog = (collectorLog + d.toString()).slice(-6000)));
      await waitFor(async () => (await redis.hexists(`${prefix}:crawl:{${recent}}:meta`, 'collectedAt')) === 1, 30_000, 'the reconciler to collect the recent crawl').catch((err: Error) => {
        throw new Error(`${err.message}; the worker said:\n${collectorLog}`);
      });
      await waitFor(async () => (await crawlsOfKeys(redis, await keysOf(redis, prefix))).get(recent)?.length === 1, 10_000, "the recent crawl's keys to go");
      const live = JSON.parse((await runCli(['status', '--crawl-id', running, '--json'], { env })).stdout);
      expect(live).toMatchObject({ state: 'running' });
      expect(live.collected).toBeUndefined();
    } finally {
      await site.close();
    }
  });

  test('on a Redis Cluster: every partition of a crawl, on every master, is collected', async () => {
    const cluster = await startRedisCluster({ masters: 3, replicasEach: 0 });
    const site = await tinySite();
    const clusterPrefix = uniquePrefix('gcc');
    const env = testEnv(clusterPrefix, { REDIS_URL: cluster.url, LOG_LEVEL: 'warn' });
    const masters = cluster.ports.map((port) => new Redis(port, '127.0.0.1'));
    try {
      const spiderFile = writeJson(dir, 'tiny-cluster.json', tinySpider(site.url));
      for (const id of ['c-one', 'c-two']) {
        const crawled = await runCli(['crawl', spiderFile, '--crawl-id', id, '--out', join(dir, `${id}.jsonl`), '--quiet'], { env, timeoutMs: 60_000 });
        expect({ id, code: crawled.code, stderr: crawled.stderr.slice(-1000) }).toEqual({ id, code: 0, stderr: expect.anything() });
      }
      const keysOnMasters = async () => (await Promise.all(masters.map((m) => keysOf(m, clusterPrefix)))).map((keys) => keys.filter((k) => k.includes(':crawl:{')));
      const spread = await keysOnMasters();
      // 16 partitions per crawl on a cluster: the crawl's keys are on every master.
      expect(spread.map((keys) => keys.length > 0)).toEqual([true, true, true]);
      // And a finished crawl of the layout before partitions (0.1): all its keys in its own slot.
      const legacy = `${clusterPrefix}:crawl:{c-legacy}`;
      const cluster0 = new Redis.Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
      await cluster0.sadd(`${clusterPrefix}:crawls`, 'c-legacy');
      await cluster0.hset(
        `${legacy}:meta`,
        'state',
        'done',
        'spiderName',
        'old',
        'startedAt',
        '2026-01-01T00:00:00.000Z',
        'finishedAt',
        '2026-01-01T01:00:00.000Z',
        'spider',
        '{}',
        'sink',
        '{"kind":"mongo"}',
      );
      await cluster0.hset(`${legacy}:counters`, 'seen', '12', 'fetched', '12', 'written', '9');
      await cluster0.hset(`${legacy}:urls`, 'a'.repeat(32), 'w');
      cluster0.disconnect();
      const gc = await runCli(['gc', '--finished-before', '0s'], { env, timeoutMs: 60_000 });
      expect({ code: gc.code, stderr: gc.stderr.slice(-2000) }).toEqual({ code: 0, stderr: expect.anything() });
      expect(gc.stdout).toMatch(/collected 3 crawls/);
      expect((await keysOnMasters()).flat().sort()).toEqual([`${legacy}:meta`, `${clusterPrefix}:crawl:{c-one}:meta`, `${clusterPrefix}:crawl:{c-two}:meta`]);
      const old = JSON.parse((await runCli(['status', '--crawl-id', 'c-legacy', '--json'], { env })).stdout);
      expect(old).toMatchObject({ state: 'done', counters: { seen: 12, written: 9 }, collected: { items: 9, sink: "mongo (the writers' MONGO_URL)" } });
      const status = JSON.parse((await runCli(['status', '--crawl-id', 'c-two', '--json'], { env })).stdout);
      expect(status).toMatchObject({ state: 'done', counters: { seen: 4, fetched: 4, written: 3, failed: 1 }, collected: { items: 3 } });
    } finally {
      for (const m of masters) m.disconnect();
      await site.close();
      await cluster.stop();
    }
  });
});
