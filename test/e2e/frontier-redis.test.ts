import { spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { Keys, closeQueues, createQueues, keySlot, runScript, urlFingerprint, validateSpider } from '@crawlfleet/core';
import { frontierOf, registerQueueGauges } from '@crawlfleet/monitoring';
import { admitToPartition, frontierTake, takenRequests, type AdmissionPolicy, type Candidate, type FrontierTake } from '@crawlfleet/frontier';
import { beginJob, finishJobTaking, getStatus, registerCrawl, settleCrawl, whileInjecting, type CrawlLayout } from '@crawlfleet/crawl';
import { REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/cli.js';

// The frontier's scripts on a real Redis: admission, the per-host queues and their ready schedule,
// budgets, the hand-over between stages, the seen-URL index, and completion across partitions.

const TAKE = frontierTake(2000);
/** Every host: 8 at once, no delay (the spider's defaults). */
const POLICY: AdmissionPolicy = { hostLimits: () => ({ concurrency: 8, delayMs: 0 }) };
const admit = (url: string, depth = 0): Candidate => ({ url, depth, verdict: 'admit' });

describe('the frontier on real Redis', () => {
  const prefix = uniquePrefix('frontier');
  const keys = new Keys(prefix);
  const clients = Array.from({ length: 8 }, () => new Redis(REDIS_URL));
  const redis = clients[0]!;
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await dropPrefix(prefix);
  });

  const part = (crawlId: string, p = 0, parts = 1) => keys.part(crawlId, p, parts);
  const running = async (crawlId: string, parts = 1) => {
    for (let p = 0; p < parts; p++) await redis.hset(part(crawlId, p, parts).part, 'state', 'running');
  };
  const admitTo = (crawlId: string, candidates: Candidate[], policy: AdmissionPolicy = POLICY, take: FrontierTake = TAKE, client = redis) =>
    admitToPartition(client, part(crawlId), crawlId, candidates, policy, take);
  const layout = (crawlId: string, parts = 1): CrawlLayout => ({ crawlId, parts });
  /** Finishes a fetch job as a fetcher does: its URL fetched, its host's turn given back, the fetch stage fed. */
  const finishFetch = (crawlId: string, jobId: string, url: string, take: FrontierTake = TAKE, host = {}) =>
    finishJobTaking(redis, keys, layout(crawlId), 'fetch', jobId, url, { take, url: { fingerprint: jobId.slice(1), state: 'd' }, host });

  test('a URL found by many parsers at the same moment is admitted exactly once, into its host queue', async () => {
    const urls = Array.from({ length: 200 }, (_, i) => `http://h.test/p-${i}.html`);
    const results = await Promise.all(
      clients.map((c, n) =>
        admitTo(
          'race',
          [...urls].sort(() => (n % 2 ? 1 : -1)).map((u) => admit(u, 1)),
          POLICY,
          TAKE,
          c,
        ),
      ),
    );
    const newOnes = results.flatMap((r) => r.admitted.filter((a) => a.isNew).map((a) => a.url));
    expect(newOnes.sort()).toEqual([...urls].sort());
    const k = part('race');
    expect(await redis.hget(k.counters, 'seen')).toBe('200');
    // A crawl that is not running takes nothing: every URL waits in its host's queue.
    expect([await redis.llen(`${k.hostQueue}h.test`), await redis.zscore(k.backlog, 'h.test'), await redis.hget(k.part, 'q'), await redis.scard(k.pending.fetch)]).toEqual([200, '200', '200', 0]);
  });

  test('maxPages caps admission; depth-refused URLs can be admitted later by a shorter path; out of scope counts once', async () => {
    const capped = await admitTo(
      'caps',
      [1, 2, 3, 4].map((i) => admit(`http://h.test/${i}`)),
      { ...POLICY, maxPages: 3 },
    );
    expect(capped.admitted.map((x) => x.url)).toEqual(['http://h.test/1', 'http://h.test/2', 'http://h.test/3']);
    expect(capped.skipped).toBe(1);
    const k = part('depth');
    expect(await admitTo('depth', [{ url: 'http://h.test/deep', depth: 9, verdict: 'too-deep' }])).toEqual({ admitted: [], taken: [], skipped: 1 });
    const shallow = await admitTo('depth', [admit('http://h.test/deep', 1)]);
    expect([shallow.admitted.map((x) => x.isNew), shallow.skipped]).toEqual([[true], -1]);
    expect(await redis.hmget(k.counters, 'skipped', 'seen')).toEqual(['0', '1']);
    // Admitted and waiting in its host's queue: nothing to enqueue again.
    expect((await admitTo('depth', [admit('http://h.test/deep', 1)])).admitted).toEqual([]);
    // Taken into the fetch stage, and offered again: enqueued again (a lost job is rebuilt; an existing one is a no-op).
    await running('depth');
    const taking = await admitTo('depth', [admit('http://h.test/deep', 1)]);
    expect([taking.admitted, taking.taken.map((t) => [t.request.url, t.delayMs])]).toEqual([[], [['http://h.test/deep', 0]]]);
    expect((await admitTo('depth', [admit('http://h.test/deep', 1)])).admitted.map((x) => x.isNew)).toEqual([false]);
    const out = await admitTo('depth', [{ url: 'http://x.test/', depth: 1, verdict: 'out-of-scope' }]);
    expect(out).toEqual({ admitted: [], taken: [], skipped: 1 });
    expect((await admitTo('depth', [{ url: 'http://x.test/', depth: 1, verdict: 'out-of-scope' }])).skipped).toBe(0);
  });

  test("limits.maxPagesPerHost: a host's URLs past its budget are skipped, each once; other hosts keep theirs", async () => {
    const policy = { ...POLICY, maxPagesPerHost: 3 };
    const trap = Array.from({ length: 5 }, (_, i) => admit(`http://trap.test/cal/${i}`));
    const other = [admit('http://ok.test/a'), admit('http://ok.test/b')];
    const first = await admitTo('budget', [...trap, ...other], policy);
    expect(first.admitted.map((a) => a.url).sort()).toEqual([...trap.slice(0, 3), ...other].map((c) => c.url).sort());
    expect(first.skipped).toBe(2);
    const more = await admitTo('budget', [...trap, admit('http://trap.test/cal/9')], policy);
    expect([more.admitted, more.skipped]).toEqual([[], 1]);
    const k = part('budget');
    expect(await redis.hmget(k.counters, 'seen', 'skipped')).toEqual(['5', '3']);
    expect((await redis.hget(k.hosts, 'trap.test'))?.split(':')[5]).toBe('3');
  });

  test('each host gets its concurrency of the window; a host with a delay gets its turns spaced by it, as waits before its jobs', async () => {
    await running('turns');
    const policy: AdmissionPolicy = { hostLimits: (host) => (host === 'slow.test' ? { concurrency: 1, delayMs: 1000 } : { concurrency: 3, delayMs: 0 }) };
    const slow = Array.from({ length: 10 }, (_, i) => admit(`http://slow.test/${i}`));
    const fast = Array.from({ length: 10 }, (_, i) => admit(`http://fast.test/${i}`));
    // The slow host's URLs come first, more of them than the window: the fast host still gets its share.
    const take = { window: 6, minBatch: 1, horizonMs: 60_000 };
    const first = await admitTo('turns', [...slow, ...fast], policy, take);
    expect(first.taken.map((t) => [t.request.url, t.delayMs]).sort()).toEqual([
      ['http://fast.test/0', 0],
      ['http://fast.test/1', 0],
      ['http://fast.test/2', 0],
      ['http://slow.test/0', 0],
    ]);
    // A fast URL's finish gives its turn to the next fast URL at once.
    const taken = (url: string) => first.taken.find((t) => t.request.url === url)!.jobId;
    const fastDone = await finishFetch('turns', taken('http://fast.test/0'), 'http://fast.test/0', take);
    expect(fastDone.taken.map((t) => [t.request.url, t.delayMs])).toEqual([['http://fast.test/3', 0]]);
    // The slow URL's finish hands out the next slow one, to start 1,040 ms after this one started.
    const [seconds] = await redis.time();
    const startedAt = Number(seconds) * 1000;
    const slowDone = await finishFetch('turns', taken('http://slow.test/0'), 'http://slow.test/0', take, { concurrency: 1, delayMs: 1000, startedAt });
    expect(slowDone.taken.map((t) => t.request.url)).toEqual(['http://slow.test/1']);
    const wait = slowDone.taken[0]!.delayMs;
    expect(wait).toBeGreaterThan(1040 - 1000 - 50);
    expect(wait).toBeLessThanOrEqual(1040);
    // A paused crawl takes nothing.
    const k = part('turns');
    await redis.hset(k.part, 'state', 'paused');
    const takeArgs = [k.part, k.pending.fetch, k.requests, k.hosts, k.ready, k.backlog];
    expect(await runScript<string[]>(redis, 'takeReady', takeArgs, [100, 1, 60_000, k.hostQueue, 'turns'])).toEqual([]);
    await redis.hset(k.part, 'state', 'running');
    // Status lists the hosts with URLs waiting, busiest first, with their turns.
    await redis.hset(keys.crawl('turns').meta, 'state', 'running', 'parts', '1');
    const status = await getStatus(redis, keys, 'turns');
    expect(status?.hosts.map((h) => [h.host, h.waiting, h.inFlight, h.concurrency, h.delayMs])).toEqual([
      ['slow.test', 8, 1, 1, 1000],
      ['fast.test', 6, 3, 3, 0],
    ]);
    expect(status?.hosts.map((h) => h.nextTurnInMs)).toEqual([null, null]);
    expect(status?.frontier).toBe(14);
  });

  test("a host's turn beyond the horizon is not handed out yet; a Retry-After hold puts its next turn after it", async () => {
    await running('hold');
    const take = { window: 10, minBatch: 1, horizonMs: 60_000 };
    const policy: AdmissionPolicy = { hostLimits: () => ({ concurrency: 1, delayMs: 0 }) };
    const first = await admitTo('hold', [admit('http://held.test/0'), admit('http://held.test/1')], policy, take);
    expect(first.taken.map((t) => t.request.url)).toEqual(['http://held.test/0']);
    const [seconds] = await redis.time();
    const now = Number(seconds) * 1000;
    // The site answered 503 with Retry-After: 5 s: the next URL waits for the hold.
    const done = await finishFetch('hold', first.taken[0]!.jobId, 'http://held.test/0', take, { concurrency: 1, delayMs: 0, startedAt: now, holdUntil: now + 5000 });
    expect(done.taken.map((t) => t.request.url)).toEqual(['http://held.test/1']);
    expect(done.taken[0]!.delayMs).toBeGreaterThan(3500);
    // A host held for two minutes is not handed out within the horizon: its URL stays queued.
    const far = await admitTo('hold', [admit('http://far.test/0'), admit('http://far.test/1')], policy, take);
    const farDone = await finishFetch('hold', far.taken[0]!.jobId, 'http://far.test/0', take, { concurrency: 1, delayMs: 0, startedAt: now, holdUntil: now + 120_000 });
    expect(farDone.taken).toEqual([]);
    expect(await redis.llen(`${part('hold').hostQueue}far.test`)).toBe(1);
  });

  test('a finish marks its handed-over job pending; a job begun before that finish is early; a dead-lettered or done one is not marked again', async () => {
    await running('handover');
    const lay = layout('handover');
    const k = part('handover');
    const { taken } = await admitTo(
      'handover',
      ['a', 'b', 'c'].map((n) => admit(`http://h.test/${n}`)),
    );
    const [a, b, c] = taken.map((t) => t.jobId.slice(1));
    const url = (fp: string) => taken.find((t) => t.jobId === `f${fp}`)!.request.url;
    // a: its parse job was added and began before the fetch job's finish: early, then pending.
    expect((await beginJob(redis, keys, lay, 'parse', `p${a}`, url(a!))).state).toBe('early');
    await finishJobTaking(redis, keys, lay, 'fetch', `f${a}`, url(a!), { url: { fingerprint: a!, state: 'd' }, handedOver: `p${a}` });
    expect((await beginJob(redis, keys, lay, 'parse', `p${a}`, url(a!))).state).toBe('running');
    // b: the URL was parsed already (a fetch job that ran again after its worker died): not marked again.
    await redis.sadd(k.pending.parse, `p${b}`);
    await finishJobTaking(redis, keys, lay, 'parse', `p${b}`, url(b!), { url: { fingerprint: b!, state: 'p' } });
    await finishJobTaking(redis, keys, lay, 'fetch', `f${b}`, url(b!), { url: { fingerprint: b!, state: 'd' }, handedOver: `p${b}` });
    expect((await beginJob(redis, keys, lay, 'parse', `p${b}`, url(b!))).state).toBe('finished');
    // c: a dead letter of its parse job exists (its failed job keeps the id in BullMQ): not marked.
    await redis.hset(k.dead, `p${c}`, '{}');
    await finishJobTaking(redis, keys, lay, 'fetch', `f${c}`, url(c!), { url: { fingerprint: c!, state: 'd' }, handedOver: `p${c}` });
    expect(await redis.smembers(k.pending.parse)).toEqual([`p${a}`]);
    expect(await redis.scard(k.pending.fetch)).toBe(0);
    // The three fetches gave their host's turns back.
    expect((await redis.hget(k.hosts, 'h.test'))?.split(':')[0]).toBe('0');
  });

  test('the seen-URL index keeps 10,000 URLs in about 220 small listpack hashes, each state once, growing by splits', async () => {
    const k = part('packed');
    const urls = Array.from({ length: 10_000 }, (_, i) => admit(`http://h.test/packed/${i}`));
    for (let i = 0; i < urls.length; i += 1000) await admitTo('packed', urls.slice(i, i + 1000));
    const [level, split, count] = (await redis.hmget(k.part, 'iL', 'is', 'in')).map(Number) as [number, number, number];
    const buckets = 2 ** level + split;
    expect(count).toBe(10_000);
    expect(buckets).toBeGreaterThanOrEqual(10_000 / 45);
    expect(buckets).toBeLessThan(10_000 / 25);
    const sizes = await Promise.all(Array.from({ length: buckets }, (_, b) => redis.hlen(`${k.urlBucket}${b}`)));
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(10_000);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(128);
    const encodings = await Promise.all(Array.from({ length: buckets }, (_, b) => redis.object('ENCODING', `${k.urlBucket}${b}`)));
    expect(new Set(encodings)).toEqual(new Set(['listpack']));
    expect(await redis.exists(`${k.urlBucket}${buckets}`)).toBe(0);
    // Each URL's record: its fingerprint's first 8 bytes, state 1 (queued), in the bucket its address names.
    const fp = urlFingerprint('packed', 'http://h.test/packed/7');
    const h = Number.parseInt(fp.slice(0, 8), 16);
    const bucket = h % 2 ** level < split ? h % 2 ** (level + 1) : h % 2 ** level;
    expect(await redis.hget(`${k.urlBucket}${bucket}`, Buffer.from(fp.slice(0, 16), 'hex'))).toBe('1');
    // Admitted again: every one is known (no second admission, nothing counted twice).
    expect((await admitTo('packed', urls.slice(0, 1000))).admitted).toEqual([]);
    expect(await redis.hget(k.counters, 'seen')).toBe('10000');
  });

  test('a crawl of four partitions is done only when all are idle at once, and not while an injection is open', async () => {
    const spider = validateSpider({ name: 'parts', startUrls: [] });
    const { layout: lay } = await registerCrawl(redis, keys, 'parts', spider, { kind: 'jsonl', path: '/dev/null' }, undefined, 4);
    expect(lay.parts).toBe(4);
    const k0 = keys.part('parts', 0, 4);
    const k3 = keys.part('parts', 3, 4);
    // Four partitions in four slots, spread over the slot space.
    expect([0, 1, 2, 3].map((p) => Math.floor(keySlot(keys.part('parts', p, 4).part) / 4096))).toEqual([0, 1, 2, 3]);
    await redis.sadd(k0.pending.parse, 'pxx');
    expect(await settleCrawl(redis, keys, lay)).toBe(false);
    await redis.srem(k0.pending.parse, 'pxx');
    await redis.hset(k3.part, 'q', '2');
    expect(await settleCrawl(redis, keys, lay)).toBe(false);
    await redis.hset(k3.part, 'q', '0');
    // While an injection (a seeding run) is open, the crawl stays running even with every partition idle.
    const during = await whileInjecting(redis, keys, lay, 'seed:test', async () => {
      expect(await settleCrawl(redis, keys, lay)).toBe(false);
      return (await redis.hget(keys.crawl('parts').meta, 'state')) ?? '';
    });
    expect(during).toBe('running');
    // Its end checks the crawl: all idle, so done.
    expect(await redis.hget(keys.crawl('parts').meta, 'state')).toBe('done');
  });

  test("the fetch backlog counts the URLs waiting in running crawls' host queues, not a paused crawl's; the ready work that autoscaling reads counts the hosts whose turn has come, not delayed jobs", async () => {
    const urls = (name: string, n: number) => Array.from({ length: n }, (_, i) => admit(`http://h.test/${name}-${i}`));
    await redis.hset(keys.crawl('backlog-running').meta, 'state', 'running', 'parts', '1');
    await redis.hset(keys.crawl('backlog-paused').meta, 'state', 'paused', 'parts', '1');
    await redis.sadd(keys.crawlIndex(), 'backlog-running', 'backlog-paused');
    // Not running in their partitions: every URL stays in the host queues.
    await admitTo('backlog-running', urls('r', 30));
    await admitTo('backlog-paused', urls('p', 12));
    // A second host of the running crawl whose turn is an hour away (a Crawl-delay, a Retry-After).
    await admitTo(
      'backlog-running',
      Array.from({ length: 5 }, (_, i) => admit(`http://slow.test/${i}`)),
    );
    await redis.zadd(keys.part('backlog-running', 0, 1).ready, String(Date.now() + 3_600_000), 'slow.test');
    const queues = createQueues(redis, keys);
    try {
      // A job parked for later (its host's turn, a retry, a paused crawl): backlog, not ready work.
      await queues.fetch.add('parked', { crawlId: 'backlog-running', url: 'http://h.test/parked', depth: 0 }, { jobId: 'parked-1', delay: 600_000 });
      const registry = new Registry();
      registerQueueGauges(registry, queues, frontierOf(redis, keys));
      const text = await registry.getSingleMetricAsString('crawlfleet_queue_backlog');
      expect(text).toContain('crawlfleet_queue_backlog{queue="fetch"} 36');
      expect(text).toContain('crawlfleet_queue_backlog{queue="parse"} 0');
      const ready = await registry.getSingleMetricAsString('crawlfleet_queue_ready');
      expect(ready).toContain('crawlfleet_queue_ready{queue="fetch"} 1');
      expect(ready).toContain('crawlfleet_queue_ready{queue="parse"} 0');
    } finally {
      await queues.fetch.remove('parked-1');
      await closeQueues(queues);
    }
  });

  test('issue 28 item 8: a delayed job whose time has come is ready work, in every queue: a stage scaled to 0 (the renderers) comes back for it', async () => {
    // Only a worker of the queue promotes its delayed jobs; with none running (KEDA scaled the
    // renderers to 0), a render job delayed for its host's turn stays delayed for ever unless the
    // gauge KEDA reads counts it once it is due.
    const queues = createQueues(redis, keys);
    try {
      const job = { crawlId: 'due-later', url: 'http://h.test/due', depth: 0 };
      const due = await queues.render.add('due', job, { jobId: 'due-render-1', delay: 20 });
      const dueWrite = await queues.write.add('due', job, { jobId: 'due-write-1', delay: 20 });
      await queues.render.add('later', job, { jobId: 'later-render-1', delay: 3_600_000 });
      // No worker runs: the jobs stay in the delayed set, the first two past their time (each add's
      // own: on a loaded machine the second add comes well after the first).
      while (Date.now() <= Math.max(due.timestamp, dueWrite.timestamp) + 20) await new Promise((r) => setTimeout(r, 10));
      expect(await queues.render.getJobCounts('delayed', 'waiting')).toEqual({ delayed: 2, waiting: 0 });
      const registry = new Registry();
      registerQueueGauges(registry, queues, frontierOf(redis, keys));
      const text = await registry.metrics();
      expect(text).toContain('crawlfleet_queue_ready{queue="render"} 1');
      expect(text).toContain('crawlfleet_queue_ready{queue="write"} 1');
      expect(text).toContain('crawlfleet_queue_ready{queue="parse"} 0');
      // The exposition is valid for Prometheus (promtool's own parser and linter).
      const checked = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
      expect(checked.stdout + checked.stderr).not.toMatch(/error/i);
      // An hour on, the later one is due too (the clock is injectable).
      const later = new Registry();
      registerQueueGauges(later, queues, frontierOf(redis, keys), { now: () => Date.now() + 3_600_001 });
      expect(await later.getSingleMetricAsString('crawlfleet_queue_ready')).toContain('crawlfleet_queue_ready{queue="render"} 2');
    } finally {
      for (const id of ['due-render-1', 'later-render-1']) await queues.render.remove(id);
      await queues.write.remove('due-write-1');
      await closeQueues(queues);
    }
  });

  test('a take returns triples the caller enqueues; a malformed request is dropped', () => {
    expect(takenRequests(['fa', '{"u":"http://h.test/","d":2}', '1500', 'fb', 'not json', '0'])).toEqual([{ jobId: 'fa', request: { url: 'http://h.test/', depth: 2 }, delayMs: 1500 }]);
  });
});
