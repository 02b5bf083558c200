import { Redis } from 'ioredis';
import { createLogger, loadEnv } from '@crawlfleet/core';
import { getStatus } from '@crawlfleet/crawl';
import { createFleetContext, createStageWorker, fetchDeadlineMs } from '@crawlfleet/runtime';
import { validateSpider } from '@crawlfleet/core';
import { chainSpider, startChainSite } from '../fixtures/chain-site.mjs';
import { REDIS_URL, deadLetters, dropPrefix, runCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';

/**
 * Every stage's handler has a hard deadline (issue #28, point 11): a handler that never returns
 * (a browser page that never gives its DOM, a close that never ends) is told to stop, its slot is
 * freed, and its job goes the way of any failure: retried, then dead-lettered with a clear code.
 */
describe('a handler that never returns', () => {
  const redis = new Redis(REDIS_URL);
  const prefixes: string[] = [];
  afterAll(async () => {
    redis.disconnect();
    for (const p of prefixes) await dropPrefix(p);
  });

  test('is stopped at HANDLER_DEADLINE_MS: both jobs of a one-slot worker are retried once (retry.attempts 1), then dead-lettered ERR_HANDLER_DEADLINE, and the crawl ends', async () => {
    const site = await startChainSite({ pages: 2 });
    const prefix = uniquePrefix('deadline');
    prefixes.push(prefix);
    const env = testEnv(prefix, { HANDLER_DEADLINE_MS: '1500' });
    const dir = tempDir('deadline');
    const ctx = await createFleetContext({ env: loadEnv(env), log: createLogger({ level: 'silent' }) });
    const started: string[] = [];
    const stopped: string[] = [];
    const worker = createStageWorker(ctx, {
      stage: 'fetch',
      concurrency: 1,
      // A handler that hangs, as a page's DOM taken from a busy page did: it only hears its signal.
      handler: ({ data, signal }) => {
        started.push(data.url);
        signal.addEventListener('abort', () => stopped.push(data.url));
        return new Promise(() => undefined);
      },
    });
    try {
      const spider = { ...chainSpider(site.url), startUrls: [`${site.url}/p/1.html`, `${site.url}/p/2.html`], retry: { attempts: 1 } };
      expect((await runCli(['seed', writeJson(dir, 'chain.json', spider), '--crawl-id', 'hang', '--sink', `${dir}/items.jsonl`], { env })).code).toBe(0);
      await waitFor(async () => (await deadLetters(redis, prefix, 'hang')).length === 2, 90_000, 'both jobs dead-lettered');
      const dead = await deadLetters(redis, prefix, 'hang');
      expect(dead.map(({ url, stage, code, attempts }) => ({ url, stage, code, attempts })).sort((a, b) => a.url.localeCompare(b.url))).toEqual(
        [1, 2].map((n) => ({ url: `${site.url}/p/${n}.html`, stage: 'fetch', code: 'ERR_HANDLER_DEADLINE', attempts: 2 })),
      );
      expect(dead[0]!.reason).toBe('the fetch handler did not finish within 1500 ms: stopped');
      // Each of the 4 runs began on the one slot and was told to stop: the slot was freed each time.
      expect(started).toHaveLength(4);
      expect(stopped.sort()).toEqual(started.sort());
      await waitFor(async () => (await getStatus(redis, ctx.keys, 'hang'))?.state === 'done', 30_000, 'the crawl to end');
      expect((await getStatus(redis, ctx.keys, 'hang'))?.counters).toMatchObject({ seen: 2, failed: 2, retries: 2 });
    } finally {
      await worker.close(true);
      await ctx.close();
      await site.close();
    }
  }, 150_000);

  test("a fetch job's deadline comes from its spider's timeouts: two requests, or in a browser the load, the DOM, the close and the wait, plus a slack", () => {
    const spider = validateSpider({ name: 's', limits: { timeoutMs: 10_000 }, render: { mode: 'always', timeoutMs: 20_000, waitFor: { maxWaitMs: 4000 } } });
    expect(fetchDeadlineMs(spider, false, 1000)).toBe(21_000);
    expect(fetchDeadlineMs(spider, true, 1000)).toBe(10_000 + 60_000 + 4000 + 1000);
    expect(fetchDeadlineMs(validateSpider({ name: 's' }), true)).toBeGreaterThan(validateSpider({ name: 's' }).limits.timeoutMs);
  });
});
