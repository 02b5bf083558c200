import { Redis } from 'ioredis';
import { pino } from 'pino';
import { loadEnv } from '@crawlfleet/core';
import { getStatus } from '@crawlfleet/crawl';
import { createFleetContext, createStageWorker } from '@crawlfleet/runtime';
import { chainSpider, startChainSite } from '../fixtures/chain-site.mjs';
import { REDIS_URL, dropPrefix, runCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';

/**
 * A job whose lock lapses while its run goes on (an event loop stalled past LOCK_DURATION_MS, a slow
 * Redis) is moved back to wait by BullMQ's stalled check, and the same worker may take it again
 * while the first run still works. Found by the review of issue #28: a renderer then had two
 * browsers on one page. The lapse is made here by deleting the job's lock, as the expiry would.
 */
describe('a job whose lock lapses mid-run', () => {
  const redis = new Redis(REDIS_URL);
  const prefixes: string[] = [];
  afterAll(async () => {
    redis.disconnect();
    for (const p of prefixes) await dropPrefix(p);
  });

  test('is not run twice at once in one process: taken again, it is parked until its run ended, and the page counts once', async () => {
    const site = await startChainSite({ pages: 1 });
    const prefix = uniquePrefix('lapsed');
    prefixes.push(prefix);
    const env = testEnv(prefix, { LOCK_DURATION_MS: '2000' });
    const dir = tempDir('lapsed');
    const warnings: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
    const ctx = await createFleetContext({ env: loadEnv(env), log });
    let runs = 0;
    let running = 0;
    let mostAtOnce = 0;
    const tookAgain = () => warnings.some((msg) => msg.startsWith('job taken again while its earlier run goes on here'));
    const worker = createStageWorker(ctx, {
      stage: 'fetch',
      concurrency: 2,
      handler: async ({ job }) => {
        runs++;
        running++;
        mostAtOnce = Math.max(mostAtOnce, running);
        try {
          if (runs === 1) {
            await redis.del(ctx.queues.fetch.toKey(`${job.id}:lock`));
            // Until BullMQ has taken the job again and it reached this process's processor (or,
            // without the guard, this handler).
            await waitFor(() => tookAgain() || runs > 1, 60_000, 'the job taken again');
          }
          return { counters: { fetched: 1 } };
        } finally {
          running--;
        }
      },
    });
    try {
      const spider = { ...chainSpider(site.url), startUrls: [`${site.url}/p/1.html`], follow: [] };
      expect((await runCli(['seed', writeJson(dir, 'chain.json', spider), '--crawl-id', 'lapsed', '--sink', `${dir}/items.jsonl`], { env })).code).toBe(0);
      await waitFor(async () => (await getStatus(redis, ctx.keys, 'lapsed'))?.state === 'done', 60_000, 'the crawl to end');
      expect(mostAtOnce).toBe(1);
      expect(tookAgain()).toBe(true);
      // Parked, it ran again after the first run had finished the job: it found nothing to do.
      expect(runs).toBe(1);
      expect((await getStatus(redis, ctx.keys, 'lapsed'))?.counters).toMatchObject({ seen: 1, fetched: 1, failed: 0 });
    } finally {
      await worker.close(true);
      await ctx.close();
      await site.close();
    }
  }, 120_000);
});
