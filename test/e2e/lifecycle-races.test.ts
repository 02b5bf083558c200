import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { Worker } from 'bullmq';
import { join } from 'node:path';
import { Keys, closeQueues, createQueues, jobId, loadEnv, urlFingerprint, validateSpider, type Queues } from '@crawlfleet/core';
import {
  admitAndEnqueue,
  allPartKeys,
  beginJob,
  cancelCrawl,
  crawlTake,
  delayJob,
  finishJob,
  finishJobTaking,
  forgetPartitions,
  getStatus,
  getCrawlState,
  PAUSED_PARK_MS,
  parkForPause,
  partKeysOfUrl,
  pauseCrawl,
  promoteStranded,
  registerCrawl,
  resumeCrawl,
  settleCrawl,
  strandedDelayBound,
  type CrawlLayout,
} from '@crawlfleet/crawl';
import { createFleetContext } from '@crawlfleet/runtime';
import { seedCrawl } from '@crawlfleet/seeder';
import { servePages } from '../fixtures/http-server.mjs';
import { REDIS_URL, dropPrefix, readJsonl, spawnCli, tempDir, testEnv, uniquePrefix, waitFor } from '../helpers/cli.js';

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
    let id: string | undefined;
    try {
      id = (await worker.getNextJob(token, { block: false }))?.id;
    } finally {
      await worker.close();
    }
    // The job as the queue reads it: the taking worker's connections are closed now.
    const job = id ? await queues.fetch.getJob(id) : undefined;
    if (!job) throw new Error('no fetch job to take');
    return job;
  };

  /** A taken job waits `ms` in BullMQ's delayed set, recorded delayed in the crawl (as a worker's deferral does it). */
  const delayTakenJob = async (layout: CrawlLayout, job: Awaited<ReturnType<typeof takeFetchJob>>, token: string, ms: number) => {
    await beginJob(redis, keys, layout, 'fetch', job.id!, job.data.url);
    await delayJob(redis, keys, layout, 'fetch', job.id!, job.data.url, 'deferred');
    await job.moveToDelayed(Date.now() + ms, token);
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

  test('a park for a pause whose record fails after the move to the delayed set leaves the job waiting, not delayed a day', async () => {
    const layout = await crawlWith('park-fails', ['http://h.test/a']);
    expect(await pauseCrawl(redis, keys, 'park-fails')).toBe('paused');
    const token = randomUUID();
    const job = await takeFetchJob(token);
    expect((await beginJob(redis, keys, layout, 'fetch', job.id!, job.data.url)).state).toBe('paused');
    // The partition's parked set is unusable (a key of the wrong type): delayJob fails after the move.
    const k = keys.part('park-fails', 0, 1);
    await redis.set(k.parked.fetch, 'not a set');
    const parked = await parkForPause(redis, keys, layout, 'fetch', job, token, job.data.url).catch((err: Error) => err);
    expect(parked).toBeInstanceOf(Error);
    expect(String(parked)).toMatch(/WRONGTYPE/);
    // It waits for a worker (which parks it again, or runs it after a resume), not for a day.
    expect(await job.getState()).toBe('waiting');
    await redis.del(k.parked.fetch);
    await job.remove();
  });

  test("the reconciler's backstop promotes a running crawl's job delayed for a day, and leaves a job's legitimate wait alone", async () => {
    const layout = await crawlWith('stranded', ['http://h.test/a', 'http://g.test/b']);
    const [first, second] = [await takeFetchJob('t1'), await takeFetchJob('t2')];
    // One job stranded by a park that failed half-way (moved for a day, the crawl running); one
    // waiting 5 minutes for a Retry-After.
    await delayTakenJob(layout, first, 't1', PAUSED_PARK_MS);
    await delayTakenJob(layout, second, 't2', 5 * 60_000);
    expect([await first.getState(), await second.getState()]).toEqual(['delayed', 'delayed']);
    const [seconds] = await redis.time();
    const promoted = await promoteStranded(redis, keys, queues, layout, strandedDelayBound(spider), Number(seconds) * 1000);
    expect(promoted).toBe(1);
    expect([await first.getState(), await second.getState()]).toEqual(['waiting', 'delayed']);
    await first.remove();
    await second.remove();
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

  test("an old run's retry after a reset and a new seed records nothing in the new run's partition (the fuzzer, seed 1191439978:long)", async () => {
    const url = 'http://h.test/delayed';
    const old = await crawlWith('delay-race', [url]);
    expect(await cancelCrawl(redis, keys, queues, 'delay-race')).toBe('cancelled');
    await forgetPartitions(redis, keys, queues, old);
    await redis.unlink(...keys.crawlOwnKeys('delay-race'));
    await new Promise((r) => setTimeout(r, 5));
    // The next run admits the same URL: its fetch job has the same id, pending again.
    const fresh = await crawlWith('delay-race', [url]);
    expect(fresh.startedAt).not.toBe(old.startedAt);
    const k = partKeysOfUrl(keys, fresh, url);
    const [id] = await redis.smembers(k.pending.fetch);
    // A worker of the old run, still on its job, retries it: nothing is recorded, nothing counted.
    expect(await delayJob(redis, keys, old, 'fetch', id!, url, 'retries')).toBe(false);
    expect(await redis.smembers(k.delayed.fetch)).toEqual([]);
    expect(await redis.hget(k.counters, 'retries')).toBeNull();
    // The new run's own retry is recorded.
    expect(await delayJob(redis, keys, fresh, 'fetch', id!, url, 'retries')).toBe(true);
    expect(await redis.smembers(k.delayed.fetch)).toEqual([id]);
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

  test("a done check's late writes to the partitions cannot end a re-seed that registered after its done mark", async () => {
    const { layout } = await registerCrawl(redis, keys, 'late-done', spider, SINK, undefined, 4);
    const ctx = await createFleetContext({ env: loadEnv(testEnv(prefix)), name: 'late-done-test' });
    try {
      // The crawl's first run ends: a done check (the reconciler's round, a finish) marks its record
      // done; its writes of `done` to the partitions land only after a re-seed registered the crawl
      // (running again) and copied `running` into them.
      let registered!: () => void;
      const reseedRegistered = new Promise<void>((resolve) => {
        registered = resolve;
      });
      let markedDone!: () => void;
      const recordDone = new Promise<void>((resolve) => {
        markedDone = resolve;
      });
      const settling = settleCrawl(redis, keys, layout, {
        afterMarkDone: async () => {
          markedDone();
          await reseedRegistered;
        },
      });
      await recordDone;
      expect(await getCrawlState(redis, keys, 'late-done')).toBe('done');
      const seeded = await seedCrawl(ctx, {
        spider,
        crawlId: 'late-done',
        sink: () => SINK,
        urls: ['http://h.test/new', 'http://g.test/new2'],
        afterRegister: async () => {
          registered();
          expect(await settling).toBe(true);
        },
      }).catch((err: Error) => err);
      expect(seeded).toMatchObject({ created: false, admitted: 2 });
      // The record and every partition's copy agree: the crawl runs until the new URLs are fetched.
      expect(await getCrawlState(redis, keys, 'late-done')).toBe('running');
      expect(await Promise.all(allPartKeys(keys, layout).map((k) => redis.hget(k.part, 'state')))).toEqual(['running', 'running', 'running', 'running']);
    } finally {
      await ctx.close();
    }
  });

  test('item 7: a job whose lock expired cannot admit links after the crawl is done', async () => {
    const { layout } = await registerCrawl(redis, keys, 'late-links', spider, SINK);
    expect(await settleCrawl(redis, keys, layout)).toBe(true);
    // The job's re-run finished it, and the crawl ended; the first run of the job now admits its links.
    const late = await admitAs(layout, ['http://h.test/late']).catch((err: Error) => err);
    expect(late).toMatchObject({ code: 'ERR_STALE_RUN' });
    const k = keys.part('late-links', 0, 1);
    expect([await redis.scard(k.pending.fetch), await redis.hget(k.counters, 'seen')]).toEqual([0, null]);
  });

  test("item 7: a failover that takes back a partition's last finishes after the crawl was marked done: the crawl runs again and ends done, exact", async () => {
    const site = await servePages({ '/a.html': '<html><body><h1>page a</h1></body></html>' });
    const dir = tempDir('after-done');
    const sink = { kind: 'jsonl' as const, path: join(dir, 'items.jsonl') };
    const pageSpider = validateSpider({ name: 'after-done', startUrls: [], allowPrivateAddresses: true, items: [{ type: 'page', fields: { title: { css: 'h1', required: true } } }] }, 'test spider');
    const fleet: ReturnType<typeof spawnCli>[] = [];
    try {
      // One page taken into the fetch stage; its stages finished by hand, as workers finish them.
      const url = `${site.url}/a.html`;
      const { layout } = await registerCrawl(redis, keys, 'after-done', pageSpider, sink);
      await admitAndEnqueue(redis, keys, queues, { ...layout, spider: pageSpider }, [{ url, depth: 0, verdict: 'admit' }], { take: crawlTake(1000, layout, pageSpider) });
      const fp = urlFingerprint('after-done', url);
      const [f, p, w] = [jobId('fetch', fp), jobId('parse', fp), jobId('write', fp)];
      await queues.fetch.remove(f);
      await finishJobTaking(redis, keys, layout, 'fetch', f, url, { url: { fingerprint: fp, state: 'd' }, counters: { fetched: 1 }, handedOver: p });
      // What the partition's replica holds when its master dies: everything up to here.
      const k = keys.part('after-done', 0, 1);
      const tag = /\{[^}]+\}/.exec(k.part)![0];
      const partitionKeys = () => redis.keys(`${prefix}:crawl:${tag.replace(/[[\]*?]/g, '\\$&')}:*`);
      const replica = new Map<string, Buffer>();
      for (const key of await partitionKeys()) replica.set(key, (await redis.dumpBuffer(key))!);
      // The parse and the write finish, the write job having been added; the crawl is marked done.
      const item = { type: 'page', url, spider: 'after-done', crawlId: 'after-done', fetchedAt: new Date().toISOString(), title: 'page a' };
      await finishJob(redis, keys, layout, 'parse', p, url, { url: { fingerprint: fp, state: 'p' }, counters: { parsed: 1, items: 1 }, handedOver: w });
      await queues.write.add('write', { crawlId: 'after-done', url, items: [item] }, { jobId: w, attempts: 3 });
      expect(await finishJob(redis, keys, layout, 'write', w, url, { url: { fingerprint: fp, state: 'w' }, counters: { written: 1 } })).toBe('crawl-done');
      // The failover: the replica takes over without the last writes of the partition's slot (the
      // parse's and the write's finishes); the done mark, on another master, stays; and so does the
      // write job, whose completion was lost with its queue's master.
      for (const key of await partitionKeys()) if (!replica.has(key)) await redis.del(key);
      for (const [key, dump] of replica) await redis.restore(key, 0, dump, 'REPLACE');
      expect(await getCrawlState(redis, keys, 'after-done')).toBe('done');
      expect(await redis.smembers(k.pending.parse)).toEqual([p]);

      const env = testEnv(prefix, { RECONCILE_INTERVAL_MS: '500', RECONCILE_GRACE_MS: '1000' });
      for (const stage of ['fetcher', 'parser', 'writer']) fleet.push(spawnCli(['worker', stage], { env }));
      const settled = async () => {
        const status = await getStatus(redis, keys, 'after-done');
        const pending = (await Promise.all(['fetch', 'parse', 'write'].map((s) => redis.scard(k.pending[s as 'fetch'])))).reduce((a, b) => a + b, 0);
        return status?.state === 'done' && pending === 0 && (await queues.write.getJob(w)) === undefined;
      };
      await waitFor(settled, 120_000, 'the crawl done again with nothing pending and no write job left');
      const status = await getStatus(redis, keys, 'after-done');
      expect(status?.counters).toMatchObject({ fetched: 1, parsed: 1, items: 1, written: 1, failed: 0 });
      expect(readJsonl(sink.path).map((i) => i.title)).toEqual(['page a']);
    } finally {
      for (const worker of fleet) worker.kill('SIGKILL');
      await Promise.all(fleet.map((worker) => worker.result));
      await site.close();
    }
  }, 300_000);
});
