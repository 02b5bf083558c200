import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { Keys, SCRIPT_NAMES, connectRedis, runScript, scriptSource, validateSpider, type RedisClient } from '@crawlfleet/core';
import { Limiter, SessionStore, healthFromHash, hostPolicy } from '@crawlfleet/politeness';
import { partKeysOfUrl } from '@crawlfleet/crawl';
import { catalogueSpider, groundTruth, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { commandsPerMaster, redisCli, spread, startRedisCluster, startRedisSentinel } from '../fixtures/redis-cluster.mjs';
import { docsSpider, findSiteRoot, hostNames, serveSite } from '../chaos/site.mjs';
import { comparable, readJsonl, runCli, spawnCli, tempDir, testEnv, waitFor, writeJson } from '../helpers/cli.js';
import { crawlStatus } from '../helpers/status.js';

// issue #12: the fleet on a real Redis Cluster (3 masters, 3 replicas) and on Sentinel (one primary,
// two replicas, three sentinels), all Debian's redis-server on loopback ports.

const FIELDS = ['type', 'url', 'link', 'title', 'price', 'sku', 'category', 'tags'];

type Fleet = ReturnType<typeof spawnCli>[];

/** The Python documentation's guides, outside its library reference (317 pages a host) and indexes. */
const DOCS_SECTIONS = '/(c-api|howto|tutorial|reference|using|faq|extending|installing|distributing)/[^/]*\\.html$';

/** Fetchers, a parser and a writer as separate processes. */
function startFleet(env: NodeJS.ProcessEnv, fetchers = 2): Fleet {
  const fleet: Fleet = [];
  for (let i = 0; i < fetchers; i++) fleet.push(spawnCli(['worker', 'fetcher', '--concurrency', '16'], { env }));
  fleet.push(spawnCli(['worker', 'parser', '--concurrency', '8'], { env }), spawnCli(['worker', 'writer'], { env }));
  return fleet;
}

async function stopFleet(fleet: Fleet): Promise<(number | null)[]> {
  for (const w of fleet) w.kill('SIGTERM');
  const results = await Promise.all(fleet.map((w) => w.result));
  return results.map((r) => r.code);
}

async function statusOf(env: NodeJS.ProcessEnv, crawlId: string) {
  const run = await runCli(['status', '--crawl-id', crawlId, '--json'], { env });
  expect(run.code).toBe(0);
  return JSON.parse(run.stdout);
}

/**
 * A crawl of 2,162 pages by a fleet of separate processes on `redisUrl`; after 600 pages (and
 * again after 1,200, for each further failover), `failovers` kill a master that matters and wait for
 * its replica to take over. The crawl must end done by itself with exactly the site's items, none
 * lost, none doubled.
 */
async function crawlThroughFailover(label: string, redisUrl: string, crawlId: string, failovers: (() => Promise<void>)[]): Promise<void> {
  const shape = siteShape(2000, 25);
  const site = await startCatalogueSite(shape, { delayMs: 5 });
  const dir = tempDir(label);
  // The reconciler checks often, so a job lost with the master is rebuilt within the test's time.
  const env = testEnv(`cf-${label}`, { REDIS_URL: redisUrl, RECONCILE_INTERVAL_MS: '3000', RECONCILE_GRACE_MS: '10000' });
  const fleet = startFleet(env);
  try {
    const out = join(dir, 'items.jsonl');
    expect((await runCli(['seed', writeJson(dir, 'spider.json', catalogueSpider(site.url)), '--crawl-id', crawlId, '--sink', out], { env })).code).toBe(0);
    for (const [i, failover] of failovers.entries()) {
      await waitFor(async () => (await crawlStatus(env, crawlId)).counters.fetched >= 600 * (i + 1), 120_000, `${600 * (i + 1)} pages fetched`);
      const killedAt = Date.now();
      await failover();
      process.stderr.write(`${label} failover ${i + 1}: a replica took over ${Date.now() - killedAt} ms after kill -9\n`);
    }
    expect((await runCli(['wait', '--crawl-id', crawlId, '--timeout', '240'], { env, timeoutMs: 250_000 })).code).toBe(0);
    const truth = groundTruth(site.url, shape);
    const expected = [...truth.products, ...truth.listings];
    const items = readJsonl(out);
    const status = await statusOf(env, crawlId);
    process.stderr.write(
      `${label} failover: ${items.length} items of ${expected.length}; ${status.counters.fetched} fetches for ${truth.paths.size} pages, ${status.counters.reconciled} jobs rebuilt by the reconciler\n`,
    );
    expect(comparable(items, FIELDS)).toEqual(comparable(expected, FIELDS));
    expect(status.state).toBe('done');
    expect(status.counters).toMatchObject({ seen: truth.paths.size, failed: 1, written: items.length });
    expect(await stopFleet(fleet)).toEqual(fleet.map(() => 0));
  } finally {
    for (const w of fleet) if (w.exitCode === null) w.kill('SIGKILL');
    await site.close();
  }
}

describe('Redis Cluster: 3 masters, 3 replicas', () => {
  let cluster: Awaited<ReturnType<typeof startRedisCluster>>;
  const dir = tempDir('cluster');

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicasEach: 1, nodeTimeoutMs: 3000 });
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  test('the fleet as separate processes, every Lua script on the cluster without CROSSSLOT, then status, monitor, replay and the dashboard', async () => {
    const site = await startCatalogueSite(siteShape(400, 20));
    const env = testEnv('cf', { REDIS_URL: cluster.url });
    const fleet = startFleet(env);
    let redis: RedisClient | undefined;
    try {
      const spider = writeJson(dir, 'catalogue.json', catalogueSpider(site.url));
      const out = join(dir, 'items.jsonl');
      expect((await runCli(['seed', spider, '--crawl-id', 'on-cluster', '--sink', out], { env })).code).toBe(0);
      const waited = await runCli(['wait', '--crawl-id', 'on-cluster', '--timeout', '150'], { env, timeoutMs: 160_000 });
      expect(waited.code).toBe(0);
      const truth = groundTruth(site.url, siteShape(400, 20));
      const items = readJsonl(out);
      expect(comparable(items, FIELDS)).toEqual(comparable([...truth.products, ...truth.listings], FIELDS));
      expect(Math.max(...site.counts().values())).toBe(1);
      const status = await statusOf(env, 'on-cluster');
      expect(status.state).toBe('done');
      expect(status.counters).toMatchObject({ seen: truth.paths.size, fetched: truth.paths.size, written: items.length, failed: 1, invalid: truth.invalid });

      // The one dead letter (the site's broken link) goes back to work and fails again, alone.
      const replayed = await runCli(['replay', '--crawl-id', 'on-cluster'], { env });
      expect(replayed.code).toBe(0);
      expect((await runCli(['wait', '--crawl-id', 'on-cluster', '--timeout', '60'], { env, timeoutMs: 70_000 })).code).toBe(0);
      const afterReplay = await statusOf(env, 'on-cluster');
      const deadAgain = JSON.parse((await runCli(['dead-letters', '--crawl-id', 'on-cluster', '--json'], { env })).stdout) as { url: string; code: string }[];
      expect(afterReplay.state).toBe('done');
      expect(afterReplay.counters).toMatchObject({ replayed: 1, failed: 1 });
      expect(deadAgain.map((d) => [d.url, d.code])).toEqual([[`${site.url}/catalogue/missing-page.html`, 'ERR_HTTP_STATUS']]);

      redis = await connectRedis(cluster.url);
      // The crawl's partition that holds the site's host (16 on a cluster).
      expect(status.partitions).toBe(16);
      const k = partKeysOfUrl(new Keys('cf'), { crawlId: 'on-cluster', parts: 16 }, site.url);
      // The frontier's take outside a finish (a resume, the reconciler's backstop), which a crawl
      // this small never needs: no host has URLs waiting, so nothing is taken.
      expect(await runScript(redis, 'takeReady', [k.part, k.pending.fetch, k.requests, k.hosts, k.ready, k.backlog], [1000, 1, 60_000, k.hostQueue, 'on-cluster'])).toEqual([]);
      // The reconciler's script, which a crawl without lost jobs never needs: a job that is not
      // pending any more is left alone (0).
      expect(
        await runScript(
          redis,
          'rewindUrl',
          [k.pending.parse, k.pending.fetch, k.rebuilds, k.suspects, k.part, k.active.parse, k.delayed.parse, k.hosts, k.ready],
          ['pnot-pending', 5, k.urlBucket, '127.0.0.1', k.hostQueue],
        ),
      ).toBe(0);
      // A retry's or a deferral's script, which a crawl whose hosts' turns come from the frontier may not need.
      expect(await runScript(redis, 'delayJob', [k.pending.fetch, k.active.fetch, k.delayed.fetch, k.counters, k.parked.fetch, k.part], ['fnot-pending', '', '', ''])).toBe(0);
      // gc's script, for crawls finished before a retention: this one finished after the cutoff (-1, left alone).
      const crawlKeys = new Keys('cf').crawl('on-cluster');
      expect(await runScript(redis, 'collectCrawl', [crawlKeys.meta, crawlKeys.seeding], ['2000-01-01T00:00:00Z', '0', new Date().toISOString()])).toBe(-1);

      // The proxy path, which a crawl without proxies never takes: a proxied request takes its
      // host then its proxy (one per second, a burst of 1); a second one must wait for the proxy
      // and gives its host back; the first one's outcome is recorded on the proxy.
      const limiter = new Limiter(redis, new Keys('cf'));
      const proxy = healthFromHash('cccccccccccc', 'c', {});
      const spiderPolicy = hostPolicy(validateSpider({ name: 'p', politeness: { concurrencyPerHost: 2, delayPerHost: 0 } }), 'proxied.test');
      const ask = (leaseId: string) =>
        limiter.acquire({
          host: 'proxied.test',
          leaseId,
          leaseMs: 10_000,
          policy: spiderPolicy,
          jitter: 1,
          deferrals: 0,
          proxies: [proxy],
          ratePerProxy: 1,
          burstPerProxy: 1,
          maxHoldMs: 60_000,
          line: 'on-cluster',
        });
      expect(await ask('l-1')).toMatchObject({ go: true, proxy: { id: 'cccccccccccc' } });
      expect(await ask('l-2')).toMatchObject({ go: false, reason: 'proxy-rate' });
      expect(
        await limiter.release({ host: 'proxied.test', leaseId: 'l-1', proxy: { id: 'cccccccccccc', outcome: 'ok' }, latencyMs: 5, banAfterFailures: 3, probeAfterMs: 1000, maxHoldMs: 60_000 }),
      ).toBe(false);

      // The fleet's sessions (issue #30) on the host's slot: two takes through one proxy share a
      // session and its cookies; a block retires it with them.
      const sessions = new SessionStore(redis, new Keys('cf'), { maxPerHost: 2, maxAgeMs: 60_000, maxUses: 10 });
      const first = await sessions.take({ host: 'sessions.test', scope: 'c' }, 'cccccccccccc', () => ({ userAgent: 'chrome-linux', headers: {} }));
      const again = await sessions.take({ host: 'sessions.test', scope: 'c' }, 'cccccccccccc', () => ({ userAgent: 'firefox-linux', headers: {} }));
      expect(again.session).toMatchObject({ id: first.session.id, profile: 'chrome-linux', uses: 2 });
      await sessions.storeCookies(first.session, 'https://sessions.test/', ['sid=1; Path=/']);
      expect(await sessions.cookieHeader(again.session, 'https://sessions.test/')).toBe('sid=1');
      expect(await sessions.retire(first.session)).toBe(true);
      expect(await sessions.cookieHeader(again.session, 'https://sessions.test/')).toBe('');
      // a host at its maximum makes room: the script's variable keys (the retired cookies) on the slot too
      const one = new SessionStore(redis, new Keys('cf'), { maxPerHost: 1, maxAgeMs: 60_000, maxUses: 10 });
      const aliveBefore = await one.alive();
      const before = await one.take({ host: 'room.test', scope: 'c' }, 'p1', () => ({ userAgent: 'chrome-linux', headers: {} }));
      await one.storeCookies(before.session, 'https://room.test/', ['sid=1; Path=/']);
      expect((await one.take({ host: 'room.test', scope: 'c' }, 'p2', () => ({ userAgent: 'chrome-linux', headers: {} }))).retired).toEqual([{ id: before.session.id, reason: 'room' }]);
      expect(await one.cookieHeader(before.session, 'https://room.test/')).toBe('');
      // the gauge reads every politeness slot's alive set, on whichever master holds it: one more
      expect(await one.alive()).toBe(aliveBefore + 1);

      // Every script ran on the master of its keys' slot: each is in some master's script cache
      // (ioredis sends EVAL when EVALSHA finds none, and a CROSSSLOT refusal comes before that).
      const masters = (await cluster.nodes()).filter((n: { flags: string[] }) => n.flags.includes('master')).map((n: { port: number }) => n.port);
      const cached = new Set<string>();
      for (const port of masters) {
        const shas = SCRIPT_NAMES.map((s) => createHash('sha1').update(scriptSource(s)).digest('hex'));
        const exists = (await redisCli(port, 'SCRIPT', 'EXISTS', ...shas)).trim().split('\n').map(Number);
        SCRIPT_NAMES.forEach((s, i) => {
          if (exists[i] === 1) cached.add(s);
        });
      }
      expect([...cached].sort()).toEqual([...SCRIPT_NAMES].sort());

      // status, monitor and the dashboard (Bull Board's API, the status objects, the metrics).
      const all = JSON.parse((await runCli(['status', '--json'], { env })).stdout);
      expect(all.map((s: { crawlId: string }) => s.crawlId)).toEqual(['on-cluster']);
      const monitor = await runCli(['monitor', '--once', '--crawl-id', 'on-cluster'], { env });
      expect(monitor.code).toBe(0);
      expect(monitor.stdout).toContain('on-cluster');
      const port = 20000 + Math.floor(Math.random() * 10000);
      const dashboard = spawnCli(['dashboard', '--port', String(port)], { env });
      try {
        await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 30_000, 'the dashboard');
        const queues = (await (await fetch(`http://127.0.0.1:${port}/api/queues`)).json()) as { queues: { name: string; counts: Record<string, number> }[] };
        expect(queues.queues.map((q) => q.name).sort()).toEqual(['fetch', 'parse', 'render', 'write']);
        const crawls = (await (await fetch(`http://127.0.0.1:${port}/api/crawls`)).json()) as { crawlId: string; state: string }[];
        expect(crawls.map((c) => [c.crawlId, c.state])).toEqual([['on-cluster', 'done']]);
        expect(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).toContain('crawlfleet_queue_backlog');
      } finally {
        dashboard.kill('SIGTERM');
        await dashboard.result;
      }
      expect(await stopFleet(fleet)).toEqual(fleet.map(() => 0));
    } finally {
      for (const w of fleet) if (w.exitCode === null) w.kill('SIGKILL');
      redis?.disconnect();
      await site.close();
    }
  });

  test("one crawl of a 10-host site spreads over the 3 masters: none carries more than 45% of the fleet's Redis commands, queues included", async () => {
    // The bench's multi-host site, Debian's Python documentation under 10 host names, without its
    // library reference and indexes: about 1,400 pages. The shares come from the slots of the
    // frontier's partitions and of the queues, not from the page count: the whole site (5,270 pages)
    // read 0.39, 0.32, 0.29 and cost this file a third of its CPU.
    const site = await serveSite(findSiteRoot());
    const hosts = hostNames(10);
    const env = testEnv('cf-spread', { REDIS_URL: cluster.url, HOST_RESOLVE: hosts.map((h) => `${h}:127.0.0.1`).join(',') });
    const fleet = startFleet(env, 1);
    try {
      const before = await commandsPerMaster(cluster);
      expect(
        (
          await runCli(
            ['seed', writeJson(dir, 'docs.json', { ...docsSpider(hosts, site.port), follow: [{ css: 'a', allow: [DOCS_SECTIONS] }] }), '--crawl-id', 'spread', '--sink', join(dir, 'docs.jsonl')],
            { env },
          )
        ).code,
      ).toBe(0);
      // A hang's bound: about 60 s on a quiet machine, over 300 s beside a fuzzer and another jest worker.
      expect((await runCli(['wait', '--crawl-id', 'spread', '--timeout', '600'], { env, timeoutMs: 610_000 })).code).toBe(0);
      const shares = spread(before, await commandsPerMaster(cluster));
      const status = await statusOf(env, 'spread');
      process.stderr.write(`cluster spread: ${shares.commands} commands for ${status.counters.fetched} pages; the masters' shares ${shares.shares.join(', ')}\n`);
      expect(status).toMatchObject({ state: 'done', partitions: 16 });
      expect(status.counters.fetched).toBeGreaterThan(1000);
      expect(shares.busiestShare).toBeLessThanOrEqual(0.45);
      expect(await stopFleet(fleet)).toEqual(fleet.map(() => 0));
    } finally {
      for (const w of fleet) if (w.exitCode === null) w.kill('SIGKILL');
      await site.close();
    }
  }, 720_000);

  test("kill -9 of the master serving the crawl's partition, then of the one serving the fetch queue, mid-crawl of 2,162 pages: replicas take over and the crawl ends done with exactly the right items", async () => {
    // The busiest slots: the crawl's partition that holds the site's host (its frontier, index and
    // pending sets), and the fetch queue's. Each master is killed in turn (the same one once, when
    // it serves both).
    const slotOf = async (key: string) => Number((await redisCli(cluster.ports[0]!, 'CLUSTER', 'KEYSLOT', key)).trim());
    const crawlId = 'failover';
    const partition = partKeysOfUrl(new Keys('cf-cluster'), { crawlId, parts: 16 }, 'http://127.0.0.1/').part;
    const masters = [...new Set([await cluster.masterOf(await slotOf(partition)), await cluster.masterOf(await slotOf(new Keys('cf-cluster').queuePrefix('fetch')))])];
    await crawlThroughFailover(
      'cluster',
      cluster.url,
      crawlId,
      masters.map((master) => async () => {
        cluster.kill(master);
        await cluster.waitForFailover(master);
      }),
    );
  }, 600_000);
});

describe('Redis Cluster: a command that waits rides out a failover (#28, item 9)', () => {
  test('`wait --timeout 500` started as the master serving the crawl is killed waits through the failover, then exits 0 when the crawl is done', async () => {
    const cluster = await startRedisCluster({ masters: 3, replicasEach: 1, nodeTimeoutMs: 3000 });
    let redis: RedisClient | undefined;
    try {
      const env = testEnv('cf-wait', { REDIS_URL: cluster.url });
      const dir = tempDir('cluster-wait');
      // A crawl that no worker runs: it stays running until the test ends it.
      const spider = writeJson(dir, 'spider.json', { name: 'waited', startUrls: ['http://127.0.0.1:9/never.html'], allowPrivateAddresses: true });
      expect((await runCli(['seed', spider, '--crawl-id', 'waited', '--sink', join(dir, 'items.jsonl')], { env })).code).toBe(0);
      const meta = new Keys('cf-wait').crawl('waited').meta;
      const master = await cluster.masterOf(Number((await redisCli(cluster.ports[0]!, 'CLUSTER', 'KEYSLOT', meta)).trim()));
      const nodes = await cluster.nodes();
      const masterId = nodes.find((n: { port: number }) => n.port === master)!.id;
      const replica = nodes.find((n: { master: string }) => n.master === masterId)!.port;
      // The failover is held until the wait has started in the middle of it (the cluster says
      // fail), and is then made by hand: a slow failover, the case the workers ride out.
      await redisCli(replica, 'CONFIG', 'SET', 'cluster-replica-no-failover', 'yes');
      cluster.kill(master);
      const live = cluster.ports.find((p: number) => p !== master && p !== replica)!;
      await waitFor(async () => (await redisCli(live, 'CLUSTER', 'INFO')).includes('cluster_state:fail'), 60_000, 'the cluster to see its master fail');
      // Its debug log says when it meets the outage: a read that failed and is tried again
      // (waitForEnd's onReadError), or a first connection tried again (connectRedisAtStartup).
      const waiting = spawnCli(['wait', '--crawl-id', 'waited', '--timeout', '500'], { env: { ...env, LOG_LEVEL: 'debug' } });
      const killer = setTimeout(() => waiting.kill('SIGKILL'), 520_000);
      let log = '';
      waiting.stderr!.on('data', (d: Buffer) => (log += d.toString()));
      const waited = waiting.result.finally(() => clearTimeout(killer));
      // The takeover only once `wait` is seen riding out the outage, not after a guess at how long it takes to start.
      await waitFor(() => /Redis did not answer; trying again|redis not reachable yet, retrying/.test(log), 120_000, '`wait` to meet the outage and try again');
      await redisCli(replica, 'CLUSTER', 'FAILOVER', 'TAKEOVER');
      await cluster.waitForFailover(master);
      // The crawl ends once its replica serves it: the last finish marks it done.
      redis = await connectRedis(cluster.url);
      await redis.hset(meta, 'state', 'done');
      const result = await waited;
      expect({ code: result.code, stderr: result.stderr.split('\n').filter((l) => !l.startsWith('{')) }).toEqual({ code: 0, stderr: ['crawl waited done', ''] });
    } finally {
      redis?.disconnect();
      await cluster.stop();
    }
  }, 600_000);
});

describe('Redis Sentinel: one primary, two replicas, three sentinels', () => {
  test('kill -9 of the primary mid-crawl: the sentinels promote a replica, and the crawl ends done with exactly the right items', async () => {
    const sentinel = await startRedisSentinel({ replicas: 2, sentinels: 3, downAfterMs: 2000 });
    try {
      await crawlThroughFailover('sentinel', sentinel.url, 'sentinel', [
        async () => {
          const primary = await sentinel.primary();
          sentinel.kill(primary);
          await sentinel.waitForFailover(primary);
        },
      ]);
    } finally {
      await sentinel.stop();
    }
  });
});
