import { createServer } from 'node:net';
import { join } from 'node:path';
import { catalogueSpider, groundTruth, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';
import { crawlStatus } from '../helpers/status.js';

/** A loopback port nothing listens on (taken, then given back). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

// Issue #19, point 6: backpressure holds back only the crawl whose writes cannot drain.
describe('backpressure per crawl', () => {
  test('a crawl whose MongoDB is unreachable stops at the high-water mark; another crawl of the same fleet finishes, exact, at its own pace', async () => {
    const shape = siteShape(300, 25);
    const site = await startCatalogueSite(shape);
    const prefix = uniquePrefix('crawl-backpressure');
    const dir = tempDir('crawl-backpressure');
    const highWater = 30;
    // The writers' MongoDB is a port nothing listens on: every write of the mongo crawl is parked.
    const env = testEnv(prefix, { MONGO_URL: `mongodb://127.0.0.1:${await closedPort()}/crawlfleet`, WRITE_HIGH_WATER: String(highWater), PARSE_HIGH_WATER: String(highWater) });
    const workers = ['fetcher', 'parser', 'writer'].map((stage) => spawnCli(['worker', stage, '--concurrency', '8'], { env }));
    const status = (crawlId: string) => crawlStatus(env, crawlId);
    try {
      const spider = writeJson(dir, 'catalogue.json', catalogueSpider(site.url));
      const truth = groundTruth(site.url, shape);
      const expected = truth.products.length + truth.listings.length;
      // The same crawl alone, for its pace on this fleet and machine.
      const aloneOut = join(dir, 'alone.jsonl');
      let started = Date.now();
      expect((await runCli(['seed', spider, '--crawl-id', 'alone', '--sink', aloneOut], { env })).code).toBe(0);
      expect((await runCli(['wait', '--crawl-id', 'alone', '--timeout', '120'], { env, timeoutMs: 130_000 })).code).toBe(0);
      const aloneSeconds = (Date.now() - started) / 1000;
      expect(readJsonl(aloneOut)).toHaveLength(expected);

      // The stuck crawl first, until it is held back; then the other one.
      expect((await runCli(['seed', spider, '--crawl-id', 'stuck', '--sink', 'mongo'], { env })).code).toBe(0);
      const writeJobsOf = (s: { queues: { write: { waiting: number; active: number; delayed: number } } }) => s.queues.write.waiting + s.queues.write.active + s.queues.write.delayed;
      await waitFor(async () => writeJobsOf(await status('stuck')) > highWater, 90_000, 'the stuck crawl to reach the mark');
      const fileOut = join(dir, 'items.jsonl');
      started = Date.now();
      expect((await runCli(['seed', spider, '--crawl-id', 'flowing', '--sink', fileOut], { env })).code).toBe(0);
      const waited = await runCli(['wait', '--crawl-id', 'flowing', '--timeout', String(Math.ceil(aloneSeconds * 3 + 30))], { env, timeoutMs: 200_000 });
      const flowingSeconds = (Date.now() - started) / 1000;
      expect(waited.code).toBe(0);
      expect(readJsonl(fileOut)).toHaveLength(expected);
      expect((await status('flowing')).counters).toMatchObject({ written: expected, failed: 1 });

      // The stuck crawl holds its write jobs at the mark (plus what its parsers had in hand), writes nothing, and runs on.
      const stuck = await status('stuck');
      const writeJobs = writeJobsOf(stuck);
      expect(stuck.state).toBe('running');
      expect(stuck.counters.written).toBe(0);
      expect(writeJobs).toBeGreaterThan(highWater);
      // Over the mark by what the parsers started before their half-second reading of the count saw it.
      expect(writeJobs).toBeLessThanOrEqual(2 * highWater);
      // Held: it does not grow.
      await new Promise((r) => setTimeout(r, 3000));
      expect(writeJobsOf(await status('stuck'))).toBe(writeJobs);
      process.stderr.write(
        `crawl backpressure: alone ${aloneSeconds.toFixed(1)} s, beside a stuck crawl ${flowingSeconds.toFixed(1)} s; the stuck crawl holds ${writeJobs} write jobs (mark ${highWater})\n`,
      );
      expect((await runCli(['cancel', '--crawl-id', 'stuck'], { env })).code).toBe(0);
    } finally {
      for (const w of workers) w.kill('SIGKILL');
      await site.close();
      await dropPrefix(prefix);
    }
  }, 600_000);
});
