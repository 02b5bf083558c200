import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Keys } from '@crawlfleet/core';
import { CrawlBacklogs, backlogDepth, backpressureAction, holdBackWaitMs, watchBackpressure } from '@crawlfleet/runtime';
import { REDIS_URL, dropPrefix, uniquePrefix, waitFor } from '../helpers/cli.js';

describe('backpressure', () => {
  test('the backlog is the jobs ready to run (waiting, prioritized); pause over the high-water mark, resume at half of it', () => {
    expect(backlogDepth({ waiting: 2, delayed: 5, prioritized: 1, active: 7, completed: 100, failed: 3 })).toBe(3);
    expect(backlogDepth({})).toBe(0);
    expect(backpressureAction(false, 11, 10)).toBe('pause');
    expect(backpressureAction(false, 10, 10)).toBe('none');
    expect(backpressureAction(true, 6, 10)).toBe('none');
    expect(backpressureAction(true, 5, 10)).toBe('resume');
    expect(backpressureAction(true, 50, 10)).toBe('none');
    expect([0, 1, 2, 3, 4, 5, 6, 20].map(holdBackWaitMs)).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  });

  test('waiting jobs in the downstream queue pause the upstream worker and it resumes once they drain; delayed ones (a store that is down, a paused crawl) do not pause it (real Redis and BullMQ)', async () => {
    const prefix = uniquePrefix('backpressure');
    const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    const downstream = new Queue('write', { connection, prefix: `${prefix}:write` });
    const upstream = new Worker('parse', async () => undefined, { connection: connection.duplicate(), prefix: `${prefix}:parse` });
    const stop = watchBackpressure(upstream, downstream, 4, pino({ level: 'silent' }), 50);
    try {
      await upstream.waitUntilReady();
      // Ten parked in the delayed set, as a writer parks them while a crawl's MongoDB is down: no pause.
      await downstream.addBulk(Array.from({ length: 10 }, (_, i) => ({ name: 'write', data: { i }, opts: { jobId: `d${i}`, delay: 3_600_000 } })));
      await new Promise((r) => setTimeout(r, 500));
      expect(upstream.isPaused()).toBe(false);
      // Five waiting: paused. Three left (over half of 4): still paused; two left: resumed.
      await downstream.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'write', data: { i }, opts: { jobId: `j${i}` } })));
      await waitFor(async () => upstream.isPaused(), 10_000, 'the upstream worker to pause');
      await downstream.remove('j0');
      await downstream.remove('j1');
      await new Promise((r) => setTimeout(r, 300));
      expect(upstream.isPaused()).toBe(true);
      await downstream.remove('j2');
      await waitFor(async () => !upstream.isPaused(), 10_000, 'the upstream worker to resume');
    } finally {
      stop();
      await upstream.close();
      await downstream.close();
      connection.disconnect();
      await dropPrefix(prefix);
    }
  });

  test('a crawl is held back by its own jobs in the next stage, over every partition, and no other crawl is (real Redis)', async () => {
    const prefix = uniquePrefix('backpressure-crawl');
    const redis = new Redis(REDIS_URL);
    const keys = new Keys(prefix);
    try {
      const stuck = { crawlId: 'stuck', parts: 4 };
      const other = { crawlId: 'other', parts: 1 };
      // Six write jobs of the stuck crawl over its partitions; three of the other.
      for (const [p, ids] of [
        [0, ['a', 'b']],
        [1, ['c', 'd']],
        [2, ['e']],
        [3, ['f']],
      ] as const)
        await redis.sadd(keys.part('stuck', p, 4).pending.write, ...ids);
      await redis.sadd(keys.part('other', 0, 1).pending.write, 'o1', 'o2', 'o3');
      const backlogs = new CrawlBacklogs(redis, keys, 'write', 4, 1000);
      expect(await backlogs.over(stuck, 0)).toBe(6);
      expect(await backlogs.over(other, 0)).toBeUndefined();
      // Read again only once the count is older than its time to live.
      await redis.del(keys.part('stuck', 0, 4).pending.write, keys.part('stuck', 1, 4).pending.write);
      expect(await backlogs.over(stuck, 999)).toBe(6);
      expect(await backlogs.over(stuck, 1000)).toBeUndefined();
    } finally {
      redis.disconnect();
      await dropPrefix(prefix);
    }
  });
});
