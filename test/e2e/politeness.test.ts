import { Redis } from 'ioredis';
import { Keys } from '@crawlfleet/core';
import { hostStats, politeSpider, startPoliteSite } from '../fixtures/polite-site.mjs';
import { REDIS_URL, dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';
import { join } from 'node:path';

const HOSTS = ['shop-1.test', 'shop-2.test', 'shop-3.test', 'shop-4.test', 'shop-5.test'];

/** Seeds a crawl, waits for it to end, and returns its items and status. */
async function crawlWithFleet(env: NodeJS.ProcessEnv, dir: string, crawlId: string, spider: object) {
  const file = writeJson(dir, `${crawlId}.json`, spider);
  const out = join(dir, `${crawlId}.jsonl`);
  const seeded = await runCli(['seed', file, '--crawl-id', crawlId, '--sink', out], { env });
  expect(seeded.code).toBe(0);
  const waited = await runCli(['wait', '--crawl-id', crawlId, '--timeout', '150'], { env, timeoutMs: 160_000 });
  expect(waited.code).toBe(0);
  const status = JSON.parse((await runCli(['status', '--crawl-id', crawlId, '--json'], { env })).stdout);
  return { items: readJsonl(out), status };
}

describe('politeness across the whole fleet: 3 fetcher processes, 32 slots each', () => {
  const prefix = uniquePrefix('polite');
  const dir = tempDir('polite');
  const env = testEnv(prefix, { HOST_RESOLVE: HOSTS.map((h) => `${h}:127.0.0.1`).join(',') });
  const workers: ReturnType<typeof spawnCli>[] = [];

  beforeAll(() => {
    for (let i = 0; i < 3; i++) workers.push(spawnCli(['worker', 'fetcher', '--concurrency', '32'], { env }));
    workers.push(spawnCli(['worker', 'parser'], { env }), spawnCli(['worker', 'writer'], { env }));
  });
  afterAll(async () => {
    for (const w of workers) w.kill('SIGTERM');
    const results = await Promise.all(workers.map((w) => w.result));
    expect(results.map((r) => (r.code === 0 ? 0 : r.stderr.slice(-2000)))).toEqual(workers.map(() => 0));
    await dropPrefix(prefix);
  });

  test('concurrencyPerHost 2 and delayPerHost 200 ms hold on every host of a 5-host site, which runs about 5 times as fast as one host', async () => {
    // 300 ms pages: with a 200 ms delay, two requests overlap, and a third would if it were let in.
    const site = await startPoliteSite({ pages: 15, delayMs: 300 });
    try {
      const politeness = { concurrencyPerHost: 2, delayPerHost: 200 };
      const one = await crawlWithFleet(env, dir, 'one-host', politeSpider('one', [HOSTS[0]!], site.port, { politeness }));
      expect(one.items).toHaveLength(15);
      // Rates over the item pages only: the index page comes before the parse that finds them.
      const pageRequests = () => site.requests.filter((r) => r.path.startsWith('/p/'));
      const alone = hostStats(pageRequests(), HOSTS[0]!);
      const oneHostRate = (alone.count - 1) / ((alone.last! - alone.first!) / 1000);
      site.requests.length = 0;

      const five = await crawlWithFleet(env, dir, 'five-hosts', politeSpider('five', HOSTS, site.port, { politeness }));
      expect(five.items.map((i) => i.title).sort()).toEqual(HOSTS.flatMap((h) => Array.from({ length: 15 }, (_, i) => `${h} p ${i + 1}`)).sort());
      expect(five.status.counters).toMatchObject({ fetched: 80, failed: 0 });
      process.stderr.write(`politeness: ${five.status.counters.deferred} deferrals for 80 pages\n`);
      const stats = HOSTS.map((h) => hostStats(site.requests, h));
      for (const s of stats) {
        expect(s.count).toBe(16);
        expect(s.maxConcurrent).toBeLessThanOrEqual(2);
        // Grants are spaced 200 ms + 15% (at most 40 ms) in Redis time; the site sees each start a
        // moment later, the time the fetcher's event loop takes to send it. A loaded machine stretches
        // that moment for one request and not the next, so one gap can shrink (199 ms, then 163 ms
        // with four test runs sharing two cores; 59 ms once in a CI run on Node 24, 1 ms in one
        // beside `yes`). The median holds the delay.
        expect(s.medianGapMs).toBeGreaterThanOrEqual(200);
      }
      // A stall shortens the one gap it falls in; a limiter that let two in at once would shorten
      // about half of them (37 of these 75), one that ignored the delay nearly all. So: at most 5 of
      // the 75 gaps under half the delay.
      const shortGaps = stats.flatMap((s) => s.gaps).filter((g) => g < 100);
      expect(shortGaps.length).toBeLessThanOrEqual(5);
      // The limit binds: the fleet had 96 slots, yet each host saw exactly its two at a time.
      expect(Math.max(...stats.map((s) => s.maxConcurrent))).toBe(2);
      const pages = pageRequests();
      const first = Math.min(...pages.map((r) => r.at));
      const last = Math.max(...pages.map((r) => r.at));
      const fiveHostRate = (pages.length - 1) / ((last - first) / 1000);
      const ratio = fiveHostRate / oneHostRate;
      process.stderr.write(
        `politeness: one host ${oneHostRate.toFixed(2)} req/s, five hosts ${fiveHostRate.toFixed(2)} req/s, ratio ${ratio.toFixed(2)}; per-host min gap ${Math.min(...stats.map((s) => s.minGapMs))} ms, gaps under 100 ms ${stats.flatMap((s) => s.gaps).filter((g) => g < 100).length} of ${stats.flatMap((s) => s.gaps).length}\n`,
      );
      // The hosts ran side by side: up to ten requests at once over the five hosts (a limiter that
      // held every host to one fleet-wide limit shows 2). Measured in requests, not in time, so a
      // loaded machine does not change it.
      expect(hostStats(pages).maxConcurrent).toBeGreaterThanOrEqual(6);
      // And in time: the ratio of the rates, printed above, about 5 (4.6 on an idle machine), 2.6 with
      // a build and a FerretDB under debug logging sharing the two cores; serialised hosts would give 1.
      // It is a figure of speed, not judged here (#29: its bound, 2.2, sat close to what a loaded
      // machine reads): the bench's to follow. The count above is the check that the hosts ran side
      // by side.
      // No ceiling on the ratio: the per-host gap and concurrency checks above already bound the rate
      // from above, and load on a shared machine that slows the one-host run only raises the ratio.
      expect(oneHostRate).toBeLessThanOrEqual(5);
    } finally {
      await site.close();
    }
  });

  test('a 429 with Retry-After: 3 holds its host for 3 s across every fetcher; another host goes on meanwhile', async () => {
    let answered429At: number | undefined;
    const site = await startPoliteSite({
      pages: 30,
      delayMs: 20,
      behave: async (_req, res, { host, path, headers }) => {
        if (host === 'shop-1.test' && path === '/p/5.html' && answered429At === undefined) {
          res.writeHead(429, { ...headers, 'retry-after': '3' });
          res.end('<html><body>slow down</body></html>');
          answered429At = Date.now();
          return true;
        }
        return false;
      },
    });
    try {
      const spider = politeSpider('ra', [HOSTS[0]!, HOSTS[1]!], site.port, { politeness: { concurrencyPerHost: 4, delayPerHost: 50 } });
      const { items, status } = await crawlWithFleet(env, dir, 'retry-after', spider);
      expect(items).toHaveLength(60);
      expect(status.counters).toMatchObject({ failed: 0, blocked: 1, retries: 1 });
      const held = site.requests.filter((r) => r.host === HOSTS[0] && r.at > answered429At!);
      expect(held.length).toBeGreaterThan(0);
      // The site's clock only: requests granted before the fetcher that got the 429 recorded its
      // hold (at most the host's 4 at once, some ms later on a loaded machine) may still arrive in
      // the 3 s; nothing granted after starts. Without the hold, the 25 pages left would all come
      // within them, at one every 50 ms.
      expect(held.filter((r) => r.at - answered429At! < 3000).length).toBeLessThanOrEqual(4);
      // The page answered 429 is asked again only once the hold has passed: its retry is granted
      // after the hold was recorded.
      const again = held.filter((r) => r.path === '/p/5.html');
      expect(again).toHaveLength(1);
      expect(again[0]!.at - answered429At!).toBeGreaterThanOrEqual(3000);
      const other = site.requests.filter((r) => r.host === HOSTS[1] && r.at > answered429At! && r.at < answered429At! + 3000);
      expect(other.length).toBeGreaterThan(0);
    } finally {
      await site.close();
    }
  });

  test('robots.txt: fetched once for the fleet; disallowed paths never requested and counted skipped; Crawl-delay raises the delay', async () => {
    const site = await startPoliteSite({
      pages: 12,
      privatePages: 4,
      behave: async (_req, res, { path, headers }) => {
        if (path !== '/robots.txt') return false;
        res.writeHead(200, { ...headers, 'content-type': 'text/plain' });
        res.end('User-agent: *\nDisallow: /private/\nCrawl-delay: 0.25\n');
        return true;
      },
    });
    try {
      const spider = politeSpider('robots', [HOSTS[2]!], site.port, { obeyRobotsTxt: true, politeness: { concurrencyPerHost: 8, delayPerHost: 0 } });
      const { items, status } = await crawlWithFleet(env, dir, 'robots', spider);
      expect(items.map((i) => i.title).sort()).toEqual(Array.from({ length: 12 }, (_, i) => `${HOSTS[2]} p ${i + 1}`).sort());
      expect(site.requests.filter((r) => r.path.startsWith('/private/'))).toEqual([]);
      expect(site.requests.filter((r) => r.path === '/robots.txt')).toHaveLength(1);
      expect(status.counters).toMatchObject({ skipped: 4, fetched: 13, failed: 0 });
      // Crawl-delay 0.25 s on Redis's clock; the site sees each request a moment after its grant,
      // which a loaded machine stretches for one request and not the next (as above): a stall
      // shortens one gap. Ignored, the delay gives 8 requests at once: nearly every gap near 0.
      const robotsGaps = hostStats(site.requests, HOSTS[2]!);
      expect(robotsGaps.medianGapMs).toBeGreaterThanOrEqual(250);
      expect(robotsGaps.gaps.filter((g: number) => g < 125).length).toBeLessThanOrEqual(2);
      // With the rules cached in Redis, a second crawl of the host does not fetch robots.txt again.
      site.requests.length = 0;
      await crawlWithFleet(env, dir, 'robots-again', spider);
      expect(site.requests.filter((r) => r.path === '/robots.txt')).toHaveLength(0);
      expect(site.requests).toHaveLength(13);
      const redis = new Redis(REDIS_URL);
      expect(await redis.ttl(new Keys(prefix).polite().robots(`http://${HOSTS[2]}:${site.port}`))).toBeGreaterThan(3000);
      redis.disconnect();
    } finally {
      await site.close();
    }
  });

  test('AutoThrottle: the host delay adapts to latency / targetConcurrency, learnt and applied by all three fetchers through Redis', async () => {
    const host = HOSTS[2]!;
    const site = await startPoliteSite({ pages: 30, delayMs: 200 });
    try {
      const spider = politeSpider('throttle', [host], site.port, { politeness: { concurrencyPerHost: 8, autoThrottle: { enabled: true, targetConcurrency: 1, maxDelay: 2000 } } });
      const { items } = await crawlWithFleet(env, dir, 'throttle', spider);
      expect(items).toHaveLength(30);
      const redis = new Redis(REDIS_URL);
      const learnt = Number(await redis.hget(new Keys(prefix).polite().host(host), 'delay'));
      redis.disconnect();
      // 200 ms pages at a target concurrency of 1: a delay of about 200 ms.
      expect(learnt).toBeGreaterThanOrEqual(150);
      expect(learnt).toBeLessThanOrEqual(400);
      // Once learnt, the 96 slots of the fleet take this host about one request at a time.
      const starts = site.requests
        .filter((r) => r.host === host)
        .map((r) => r.at)
        .sort((a, b) => a - b);
      const gaps = starts
        .slice(-15)
        .map((t, i, all) => (i === 0 ? Infinity : t - all[i - 1]!))
        .slice(1)
        .sort((a, b) => a - b);
      expect(gaps[Math.floor(gaps.length / 2)]).toBeGreaterThanOrEqual(150);
      expect(
        hostStats(
          site.requests.filter((r) => r.at >= starts[starts.length - 15]!),
          host,
        ).maxConcurrent,
      ).toBeLessThanOrEqual(2);
    } finally {
      await site.close();
    }
  });

  test("one fetcher with 64 slots and one slow host: the slow host's URLs wait in its queue, not in fetch slots nor parked, and the other host is crawled meanwhile", async () => {
    const [slow, fast] = [HOSTS[3]!, HOSTS[4]!];
    const site = await startPoliteSite({
      pages: 40,
      behave: async (_req, _res, { host }) => {
        if (host === slow) await new Promise((r) => setTimeout(r, 500));
        return false;
      },
    });
    // Its own prefix: the fleet above stays out of this crawl.
    const alone = uniquePrefix('slow');
    try {
      const spider = writeJson(dir, 'slow.json', politeSpider('slow', [slow, fast], site.port, { hosts: { [slow]: { concurrencyPerHost: 2 } } }));
      const run = await runCli(['crawl', spider, '--crawl-id', 'slow', '--concurrency', '64', '--out', join(dir, 'slow.jsonl'), '--quiet', '--json'], {
        env: testEnv(alone, { HOST_RESOLVE: env.HOST_RESOLVE! }),
      });
      expect(run.code).toBe(0);
      // Waiting does not spin: the 40 slow pages waited about 10 s in all in their host's queue, which
      // hands out two at a time, so a job is seldom parked for its host's turn (issue #18).
      const { deferred } = JSON.parse(run.stdout.trim().split('\n').pop()!).counters;
      process.stderr.write(`slow host: ${deferred} deferrals for 40 waiting pages\n`);
      expect(deferred).toBeLessThanOrEqual(4);
      expect(readJsonl(join(dir, 'slow.jsonl'))).toHaveLength(80);
      const slowStats = hostStats(site.requests, slow);
      const fastStats = hostStats(site.requests, fast);
      expect(slowStats.maxConcurrent).toBe(2);
      // 41 slow requests, two at a time, take 10 s; the fast host is done before the slow one's 8th.
      const slowStarts = site.requests
        .filter((r) => r.host === slow)
        .map((r) => r.at)
        .sort((a, b) => a - b);
      expect(fastStats.last!).toBeLessThan(slowStarts[7]!);
      expect(fastStats.count).toBe(41);
    } finally {
      await site.close();
      await dropPrefix(alone);
    }
  });
});
