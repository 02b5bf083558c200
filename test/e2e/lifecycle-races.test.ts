import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { Worker } from 'bullmq';
import { Keys, closeQueues, createQueues, loadEnv, validateSpider, type Queues } from '@crawlfleet/core';
import {
  admitAndEnqueue,
  beginJob,
  cancelCrawl,
  crawlTake,
  forgetPartitions,
  getCrawlState,
  parkForPause,
  pauseCrawl,
  registerCrawl,
  resumeCrawl,
  settleCrawl,
  type CrawlLayout,
} from '@crawlfleet/crawl';
import { createFleetContext } from '@crawlfleet/runtime';
import { seedCrawl } from '@crawlfleet/seeder';
import { REDIS_URL, dropPrefix, testEnv, uniquePrefix } from '../helpers/cli.js';

// Races of a crawl's life (issue #28, items 2, 3, 4 and 7), each built step by step in the racing
// order against a real Redis: the steps are called directly, or through a narrow test hook placed
// in the window where the other party lands.

const spider = validateSpider({ name: 'races', startUrls: [], allowPrivateAddresses: true }, 'test spider');
const SINK = { kind: 'jsonl' as const, path: '/dev/null' };

describe('races of a crawl life, on a real Redis', () => {
  const prefix = uniquePrefix('races');
  const keys = new Keys(prefix);
  const redis = new Redis(REDIS_URL);
  const bull = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  let queues: Queues;
  beforeAll(() => {
    queues = createQueues(redis, keys);
  });
  afterAll(async () => {
    await closeQueues(queues);
    redis.disconnect();
    bull.disconnect();
    await dropPrefix(prefix);
  });

  /** Registers a crawl of one partition and admits `urls`: their fetch jobs are pending and queued. */
  const crawlWith = async (crawlId: string, urls: string[]): Promise<CrawlLayout> => {
    const { layout } = await registerCrawl(redis, keys, crawlId, spider, SINK);
    const take = crawlTake(1000, layout, spider);
    await admitAndEnqueue(
      redis,
      keys,
      queues,
      { ...layout, spider },
      urls.map((url) => ({ url, depth: 0, verdict: 'admit' as const })),
      { take },
    );
    return layout;
  };

  const admitAs = (layout: CrawlLayout, urls: string[]) =>
    admitAndEnqueue(
      redis,
      keys,
      queues,
      { ...layout, spider },
      urls.map((url) => ({ url, depth: 0, verdict: 'admit' as const })),
      { take: crawlTake(1000, layout, spider) },
    );

  /** Every key of a partition's slot (its hash tag) still in Redis. */
  const keysOfPartition = async (crawlId: string) => {
    const tag = /\{[^}]+\}/.exec(keys.part(crawlId, 0, 1).part)![0];
    return redis.keys(`${prefix}:*${tag.replace(/[[\]*?]/g, '\\$&')}*`);
  };

  /** A worker's take of the next fetch job, by hand: the job is active, locked by `token`. */
  const takeFetchJob = async (token: string) => {
    const worker = new Worker(queues.fetch.name, undefined, { connection: bull, prefix: keys.queuePrefix('fetch'), autorun: false });
    try {
      const job = await worker.getNextJob(token, { block: false });
      if (!job) throw new Error('no fetch job to take');
      return job;
    } finally {
      await worker.close();
    }
  };

  test('item 2: a resume that lands between the parking of a paused job and its move to the delayed set leaves no job parked for 24 h', async () => {
    const layout = await crawlWith('pause-race', ['http://h.test/a']);
    expect(await pauseCrawl(redis, keys, 'pause-race')).toBe('paused');
    const token = randomUUID();
    const job = await takeFetchJob(token);
    const begun = await beginJob(redis, keys, layout, 'fetch', job.id!, job.data.url);
    expect(begun.state).toBe('paused');
    // The worker parks the job; the resume comes in the middle of it.
    await parkForPause(redis, keys, layout, 'fetch', job, token, job.data.url, async () => {
      expect(await resumeCrawl(redis, keys, queues, 'pause-race', 1000)).toBe('running');
    });
    // The job runs now: it waits for a worker, not for a day in the delayed set, and nothing of it stays parked.
    expect(await job.getState()).toBe('waiting');
    expect(await redis.scard(keys.part('pause-race', 0, 1).parked.fetch)).toBe(0);
    await job.remove(); // the queue is shared with the next tests
  });

  test('item 2, without a race: a paused job is parked, in BullMQ and in the crawl', async () => {
    const layout = await crawlWith('pause-plain', ['http://h.test/a']);
    expect(await pauseCrawl(redis, keys, 'pause-plain')).toBe('paused');
    const token = randomUUID();
    const job = await takeFetchJob(token);
    await beginJob(redis, keys, layout, 'fetch', job.id!, job.data.url);
    await parkForPause(redis, keys, layout, 'fetch', job, token, job.data.url);
    expect(await job.getState()).toBe('delayed');
    expect(await redis.scard(keys.part('pause-plain', 0, 1).delayed.fetch)).toBe(1);
    expect(await redis.scard(keys.part('pause-plain', 0, 1).parked.fetch)).toBe(1);
    await job.remove();
  });

  test('item 3: an old run that admits a link while reset (or gc) unlinks its partition leaves nothing behind for the next run', async () => {
    const old = await crawlWith('reset-race', ['http://h.test/1']);
    expect(await cancelCrawl(redis, keys, queues, 'reset-race')).toBe('cancelled');
    // reset (and gc) forget the partitions; a parse job of the old run admits its page's links meanwhile.
    await forgetPartitions(redis, keys, queues, old, {
      afterIndexGone: async () => {
        await admitAs(old, ['http://h.test/2']).catch(() => undefined);
      },
    });
    await redis.unlink(...keys.crawlOwnKeys('reset-race'));
    expect(await keysOfPartition('reset-race')).toEqual([]);
    // The next run sees the link as new: a seed admits it.
    const { layout } = await registerCrawl(redis, keys, 'reset-race', spider, SINK);
    expect((await admitAs(layout, ['http://h.test/2'])).seen).toBe(1);
  });

  test('item 4: a done check between the registration of a re-seed and its first admission cannot end the crawl under the seed', async () => {
    const { layout } = await registerCrawl(redis, keys, 'reseed-race', spider, SINK);
    expect(await settleCrawl(redis, keys, layout)).toBe(true);
    const ctx = await createFleetContext({ env: loadEnv(testEnv(prefix)), name: 'reseed-test' });
    try {
      // Seeded again with a new URL; a worker's done check (a finish that left its partition idle,
      // the reconciler's round) runs right after the registration.
      const seeded = await seedCrawl(ctx, {
        spider,
        crawlId: 'reseed-race',
        sink: () => SINK,
        urls: ['http://h.test/new'],
        afterRegister: async () => {
          await settleCrawl(redis, keys, layout);
        },
      });
      expect(seeded).toMatchObject({ created: false, admitted: 1 });
      // The new URL is pending: the crawl runs until it is fetched.
      expect(await getCrawlState(redis, keys, 'reseed-race')).toBe('running');
      expect(await redis.scard(keys.part('reseed-race', 0, 1).pending.fetch)).toBe(1);
    } finally {
      await ctx.close();
    }
  });
});
