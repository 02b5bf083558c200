import { join } from 'node:path';
import { longTailSpider, resolveToLoopback, startLongTailSite, tailHosts } from '../fixtures/long-tail-site.mjs';
import { hostStats } from '../fixtures/polite-site.mjs';
import { dropPrefix, readJsonl, resultWithin, runCli, spawnCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

// Issue #18: the long tail. 200 hosts of 30 pages each, every page linking to all of its host's
// pages; one request per host at a time, 2 s apart. A host's 30 pages take about 60 s however many
// hosts there are, so the ideal crawl takes about 60 s. Before the per-host frontier, the window filled
// host by host: hosts began only as others ended, and the crawl took 2.4 times the ideal. Now every
// host is under way at once, in one process and as a fleet of separate processes: the last host to
// begin does so before the first one ends, on the site's own record of its requests. That holds
// however slow the machine is, where a bound on the crawl's time (1.5 times the ideal, until
// issue #29) failed on a loaded CI machine with no bug; the time is printed.

const HOSTS = tailHosts(200);
const PAGES = 30;
const DELAY_MS = 2000;
const IDEAL_S = (PAGES * DELAY_MS) / 1000;

describe('the long tail: 200 hosts, 30 pages each, one request per host every 2 s', () => {
  const dir = tempDir('tail');
  let site: Awaited<ReturnType<typeof startLongTailSite>>;
  const prefixes: string[] = [];
  beforeAll(async () => {
    site = await startLongTailSite({ pages: PAGES });
  });
  afterAll(async () => {
    await site.close();
    for (const p of prefixes) await dropPrefix(p);
  });

  /**
   * Every host's pages, each fetched once, one at a time and the delay apart. Grants are 2,040 ms
   * apart on Redis's clock; the site sees each start a moment after its grant, the time the
   * fetcher's event loop takes to send it, so under load two starts may look a little closer.
   */
  function expectPolite(since: number) {
    const requests = site.requests.filter((r) => r.at >= since);
    expect(requests).toHaveLength(HOSTS.length * PAGES);
    let smallestGap = Infinity;
    const medians: number[] = [];
    let lastToBegin = -Infinity;
    let firstToEnd = Infinity;
    for (const host of HOSTS) {
      const stats = hostStats(requests, host);
      expect([host, stats.count, stats.maxConcurrent]).toEqual([host, PAGES, 1]);
      smallestGap = Math.min(smallestGap, stats.minGapMs);
      medians.push(stats.medianGapMs);
      lastToBegin = Math.max(lastToBegin, stats.first);
      firstToEnd = Math.min(firstToEnd, stats.last);
    }
    // Every host under way at once: none waited for another to end.
    expect(lastToBegin).toBeLessThan(firstToEnd);
    expect(Math.min(...medians)).toBeGreaterThanOrEqual(DELAY_MS);
    // A loaded machine (the CI run beside other work) was seen to show 1,441 ms between two grants
    // 2,040 ms apart; two requests at once, or a host asked twice in a turn, would show near 0.
    expect(smallestGap).toBeGreaterThanOrEqual(DELAY_MS * 0.6);
    return smallestGap;
  }

  const expectItems = (out: string) => {
    const titles = readJsonl(out).map((i) => i.title as string);
    expect(titles).toHaveLength(HOSTS.length * PAGES);
    expect(new Set(titles).size).toBe(HOSTS.length * PAGES);
  };

  test('in one process (crawlfleet crawl): every host under way at once', async () => {
    const prefix = uniquePrefix('tail-1p');
    prefixes.push(prefix);
    const env = testEnv(prefix, { HOST_RESOLVE: resolveToLoopback(HOSTS), LOG_LEVEL: 'warn' });
    const out = join(dir, 'one.jsonl');
    const since = Date.now();
    const run = await runCli(
      ['crawl', writeJson(dir, 'tail.json', longTailSpider(HOSTS, site.port, { delayMs: DELAY_MS })), '--crawl-id', 'tail-1p', '--out', out, '--json', '--quiet', '--concurrency', '64'],
      {
        env,
        timeoutMs: 400_000,
      },
    );
    const seconds = (Date.now() - since) / 1000;
    expect(run.code).toBe(0);
    const gap = expectPolite(since);
    expectItems(out);
    const status = JSON.parse(run.stdout.trim().split('\n').pop()!);
    process.stderr.write(
      `long tail, one process: ${seconds.toFixed(1)} s for ${HOSTS.length} hosts x ${PAGES} pages (ideal ${IDEAL_S} s, ratio ${(seconds / IDEAL_S).toFixed(2)}); smallest gap ${gap} ms; ${status.counters.deferred} deferrals\n`,
    );
    expect(status.counters).toMatchObject({ fetched: HOSTS.length * PAGES, written: HOSTS.length * PAGES, failed: 0 });
  }, 440_000);

  test('as a fleet of separate processes, the frontier in 4 partitions: every host under way at once', async () => {
    const prefix = uniquePrefix('tail-np');
    prefixes.push(prefix);
    const env = testEnv(prefix, { HOST_RESOLVE: resolveToLoopback(HOSTS), LOG_LEVEL: 'warn', FRONTIER_PARTITIONS: '4' });
    const out = join(dir, 'fleet.jsonl');
    const workers = [spawnCli(['worker', 'fetcher', '--concurrency', '64'], { env }), spawnCli(['worker', 'parser', '--concurrency', '8'], { env }), spawnCli(['worker', 'writer'], { env })];
    try {
      const since = Date.now();
      const seeded = await runCli(['seed', writeJson(dir, 'tail-np.json', longTailSpider(HOSTS, site.port, { delayMs: DELAY_MS })), '--crawl-id', 'tail-np', '--sink', out], { env });
      expect(seeded.code).toBe(0);
      expect((await runCli(['wait', '--crawl-id', 'tail-np', '--timeout', '400'], { env, timeoutMs: 420_000 })).code).toBe(0);
      const seconds = (Date.now() - since) / 1000;
      const gap = expectPolite(since);
      expectItems(out);
      const status = JSON.parse((await runCli(['status', '--crawl-id', 'tail-np', '--json'], { env })).stdout);
      process.stderr.write(`long tail, fleet: ${seconds.toFixed(1)} s (ideal ${IDEAL_S} s, ratio ${(seconds / IDEAL_S).toFixed(2)}); smallest gap ${gap} ms; ${status.counters.deferred} deferrals\n`);
      expect(status).toMatchObject({ state: 'done', partitions: 4, counters: { fetched: HOSTS.length * PAGES, written: HOSTS.length * PAGES, failed: 0 } });
    } finally {
      for (const w of workers) w.kill('SIGTERM');
      for (const w of workers) expect((await resultWithin(w, 30_000, 'a worker')).code).toBe(0);
    }
  }, 520_000);
});
