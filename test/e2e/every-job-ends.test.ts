import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { Redis } from 'ioredis';
import { Queue, UnrecoverableError, Worker } from 'bullmq';
import { Keys, jobId, loadEnv, urlFingerprint, validateSpider } from '@crawlfleet/core';
import { admitToPartition } from '@crawlfleet/frontier';
import { admissionPolicy, admitAndEnqueue, crawlTake, getDeadLetters, getStatus, registerCrawl, whileInjecting } from '@crawlfleet/crawl';
import { createFleetContext } from '@crawlfleet/runtime';
import { chainSpider, startChainSite } from '../fixtures/chain-site.mjs';
import { REDIS_URL, deadLetters, dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

/**
 * Every pending job ends (issue #9, points 1, 2 and 8): a job lost from BullMQ is rebuilt, one
 * BullMQ failed on its own is dead-lettered, a stage a URL has passed never runs twice, and a crawl
 * is not marked done while its seeds are still being admitted.
 */
const FAST_RECONCILER = { RECONCILE_INTERVAL_MS: '500', RECONCILE_GRACE_MS: '1500' };

type Fleet = ReturnType<typeof spawnCli>[];

function startFleet(env: NodeJS.ProcessEnv, fleet: Fleet, stages: ('fetcher' | 'parser' | 'writer')[] = ['fetcher', 'parser', 'writer']): void {
  for (const stage of stages) fleet.push(spawnCli(['worker', stage, '--concurrency', '8'], { env }));
}

async function stopFleet(fleet: Fleet): Promise<void> {
  for (const w of fleet) if (w.exitCode === null) w.kill('SIGKILL');
  await Promise.all(fleet.map((w) => w.result));
}

async function statusOf(env: NodeJS.ProcessEnv, crawlId: string) {
  const out = await runCli(['status', '--crawl-id', crawlId, '--json'], { env });
  return JSON.parse(out.stdout) as { state: string; counters: Record<string, number>; deadLetters?: unknown };
}

async function waitDone(env: NodeJS.ProcessEnv, crawlId: string, seconds = 90, fleet: Fleet = []): Promise<void> {
  const waited = await runCli(['wait', '--crawl-id', crawlId, '--timeout', String(seconds)], { env, timeoutMs: (seconds + 10) * 1000 });
  if (waited.code !== 0) {
    // What the workers said, to tell a hang from a crash.
    for (const w of fleet) w.kill('SIGKILL');
    const tails = await Promise.all(fleet.map(async (w) => (await w.result).stderr.slice(-1500)));
    process.stderr.write(`crawl ${crawlId} did not end: ${JSON.stringify(await statusOf(env, crawlId))}\n${tails.join('\n---\n')}\n`);
  }
  expect(waited.code).toBe(0);
}

const titles = (items: Record<string, unknown>[]) => items.map((i) => String(i.title)).sort();
const pageTitles = (n: number, kind = 'p') => Array.from({ length: n }, (_, i) => `${kind} ${i + 1}`);

describe('every pending job ends', () => {
  const redis = new Redis(REDIS_URL);
  const prefixes: string[] = [];
  afterAll(async () => {
    redis.disconnect();
    for (const p of prefixes) await dropPrefix(p);
  });
  const setup = (name: string, extra: Record<string, string> = {}) => {
    const prefix = uniquePrefix(name);
    prefixes.push(prefix);
    return { prefix, keys: new Keys(prefix), env: testEnv(prefix, { ...FAST_RECONCILER, ...extra }), dir: tempDir(name) };
  };

  test('a job removed by hand and URLs whose seeder died before enqueueing them are rebuilt by the reconciler; the crawl ends with every item', async () => {
    const site = await startChainSite({ pages: 20 });
    const { keys, env, dir } = setup('lost');
    const fleet: Fleet = [];
    const queue = new Queue('fetch', { connection: redis.duplicate(), prefix: keys.queuePrefix('fetch') });
    try {
      const out = join(dir, 'items.jsonl');
      const seeded = await runCli(['seed', writeJson(dir, 'chain.json', chainSpider(site.url)), '--crawl-id', 'lost', '--sink', out], { env });
      expect(seeded.code).toBe(0);
      // The seed's job removed by hand (Bull Board's Remove, `clean`): its id stays pending.
      const indexJob = jobId('fetch', urlFingerprint('lost', `${site.url}/index.html`));
      expect(await queue.remove(indexJob)).toBe(1);
      // A seeder that died between admission and addBulk: five URLs admitted, no job behind them.
      const extra = Array.from({ length: 5 }, (_, i) => ({ url: `${site.url}/extra/${i + 1}.html`, depth: 0, verdict: 'admit' as const }));
      const spider = validateSpider(chainSpider(site.url), 'chain');
      const layout = { crawlId: 'lost', parts: 1 };
      expect((await admitToPartition(redis, keys.part('lost', 0, 1), 'lost', extra, admissionPolicy(spider), crawlTake(2000, layout, spider))).taken).toHaveLength(5);
      expect(await redis.scard(keys.part('lost', 0, 1).pending.fetch)).toBe(6);

      startFleet(env, fleet);
      await waitDone(env, 'lost', 90, fleet);
      expect(titles(readJsonl(out))).toEqual([...pageTitles(20), ...pageTitles(5, 'extra')].sort());
      const status = await statusOf(env, 'lost');
      expect(status.state).toBe('done');
      expect(status.counters).toMatchObject({ fetched: 26, parsed: 26, items: 25, written: 25, failed: 0, reconciled: 6 });
      // Nothing of the URLs in flight is kept once they are done.
      expect(await redis.hlen(keys.part('lost', 0, 1).requests)).toBe(0);
    } finally {
      await stopFleet(fleet);
      await queue.close();
      await site.close();
    }
  });

  test('a page fetched by a fetcher that hands over, its parse job lost, is parsed by a fetcher that parses: counted once', async () => {
    const site = await startChainSite({ pages: 20 });
    const { keys, env, dir } = setup('switched');
    const fleet: Fleet = [];
    const queue = new Queue('parse', { connection: redis.duplicate(), prefix: keys.queuePrefix('parse') });
    try {
      const out = join(dir, 'items.jsonl');
      expect((await runCli(['seed', writeJson(dir, 'chain.json', chainSpider(site.url)), '--crawl-id', 'switched', '--sink', out], { env })).code).toBe(0);
      // A fetcher that hands pages over, and no parser: the start page is fetched, its parse job waits.
      startFleet(env, fleet, ['fetcher']);
      const parseJob = jobId('parse', urlFingerprint('switched', `${site.url}/index.html`));
      while ((await queue.getJob(parseJob)) === undefined) await new Promise((r) => setTimeout(r, 50));
      await stopFleet(fleet);
      fleet.length = 0;
      // The hand-over lost (removed by hand): the reconciler sends the URL back to fetch, fetched before.
      expect(await queue.remove(parseJob)).toBe(1);
      startFleet({ ...env, PARSE_IN_FETCHER: '1' }, fleet, ['fetcher', 'writer']);
      await waitDone(env, 'switched', 90, fleet);
      expect(titles(readJsonl(out))).toEqual(pageTitles(20).sort());
      // The start page's fetch counted once (before), its parse once (after); without the split
      // count in finishJob its parse and items went uncounted.
      expect((await statusOf(env, 'switched')).counters).toMatchObject({ fetched: 21, parsed: 21, items: 20, written: 20, failed: 0, reconciled: 1 });
    } finally {
      await stopFleet(fleet);
      await queue.close();
      await site.close();
    }
  });

  test('a job BullMQ failed without our processor finishing it is dead-lettered with its reason, and the crawl ends', async () => {
    const site = await startChainSite({ pages: 3 });
    const { keys, env, dir } = setup('failed');
    const fleet: Fleet = [];
    try {
      const seeded = await runCli(['seed', writeJson(dir, 'chain.json', chainSpider(site.url)), '--crawl-id', 'failed', '--sink', join(dir, 'items.jsonl')], { env });
      expect(seeded.code).toBe(0);
      // A foreign worker (an older fleet, a crash before the handler) fails the seed's job outright.
      const failing = new Worker(
        'fetch',
        async () => {
          throw new UnrecoverableError('boom before the handler');
        },
        { connection: new Redis(REDIS_URL, { maxRetriesPerRequest: null }), prefix: keys.queuePrefix('fetch') },
      );
      const queue = new Queue('fetch', { connection: redis.duplicate(), prefix: keys.queuePrefix('fetch') });
      const id = jobId('fetch', urlFingerprint('failed', `${site.url}/index.html`));
      for (let i = 0; i < 100 && !(await (await queue.getJob(id))?.isFailed()); i++) await new Promise((r) => setTimeout(r, 100));
      await failing.close();
      await queue.close();
      expect(await redis.sismember(keys.part('failed', 0, 1).pending.fetch, id)).toBe(1);

      startFleet(env, fleet, ['fetcher']);
      await waitDone(env, 'failed', 60, fleet);
      const dead = await getDeadLetters(redis, keys, 'failed');
      expect(Object.keys(dead)).toEqual([id]);
      expect(dead[id]).toMatchObject({ url: `${site.url}/index.html`, stage: 'fetch', code: 'ERR_JOB_FAILED', reason: 'boom before the handler' });
      expect((await statusOf(env, 'failed')).counters).toMatchObject({ fetched: 0, failed: 1 });
    } finally {
      await stopFleet(fleet);
      await site.close();
    }
  });

  test('a page whose parse crashes the parser process every time ends as a dead letter (ERR_STALLED), and the crawl finishes with every other item', async () => {
    const site = await startChainSite({ pages: 10, crashPage: true });
    // A short lock, so a dead parser's job is found stalled within seconds; 3 stalls (10 by default).
    const { keys, env, dir } = setup('poison', { LOCK_DURATION_MS: '2000', MAX_STALLED_COUNT: '3' });
    const fleet: Fleet = [];
    let parserStarts = 0;
    let stopping = false;
    const parserEnv = { ...env, NODE_OPTIONS: '--max-old-space-size=80' };
    // A supervisor, as compose or Kubernetes would be: a parser that dies is started again.
    const superviseParser = () => {
      parserStarts++;
      const parser = spawnCli(['worker', 'parser', '--concurrency', '1'], { env: parserEnv });
      fleet.push(parser);
      parser.on('exit', () => {
        if (!stopping) superviseParser();
      });
    };
    try {
      const out = join(dir, 'items.jsonl');
      const spider = chainSpider(site.url, { limits: { maxResponseBytes: 16 * 1024 * 1024 } });
      expect((await runCli(['seed', writeJson(dir, 'chain.json', spider), '--crawl-id', 'poison', '--sink', out], { env })).code).toBe(0);
      startFleet(env, fleet, ['fetcher', 'writer']);
      superviseParser();
      await waitDone(env, 'poison', 150, fleet);
      expect(titles(readJsonl(out))).toEqual(pageTitles(10).sort());
      const dead = await deadLetters(redis, keys.prefix, 'poison');
      expect(dead).toHaveLength(1);
      expect(dead[0]).toMatchObject({ url: `${site.url}/crash.html`, stage: 'parse', code: 'ERR_STALLED' });
      expect(dead[0]!.reason).toMatch(/stalled more than allowable limit/);
      // MAX_STALLED_COUNT 3: the page took the parser down four times, then BullMQ failed its job.
      expect(parserStarts).toBeGreaterThanOrEqual(4);
      expect((await statusOf(env, 'poison')).counters).toMatchObject({ fetched: 12, parsed: 11, items: 10, failed: 1 });
    } finally {
      stopping = true;
      await stopFleet(fleet);
      await site.close();
    }
  }, 400_000);

  test('a fetch job that runs again after its parse and write finished (its fetcher died before recording its end) does not parse, count or write the page twice', async () => {
    const site = await startChainSite({ pages: 5 });
    const { keys, env, dir } = setup('rerun');
    const fleet: Fleet = [];
    const queue = new Queue('fetch', { connection: redis.duplicate(), prefix: keys.queuePrefix('fetch') });
    try {
      const out = join(dir, 'items.jsonl');
      expect((await runCli(['seed', writeJson(dir, 'chain.json', chainSpider(site.url)), '--crawl-id', 'rerun', '--sink', out], { env })).code).toBe(0);
      startFleet(env, fleet);
      await waitDone(env, 'rerun');
      const before = (await statusOf(env, 'rerun')).counters;
      expect(before).toMatchObject({ fetched: 6, parsed: 6, items: 5, written: 5 });

      // The state a fetcher leaves when it dies after enqueueing the parse job and before finishJob:
      // the fetch job is still pending and runs again, while its parse and write jobs are done.
      const url = `${site.url}/p/3.html`;
      const id = jobId('fetch', urlFingerprint('rerun', url));
      const k = keys.part('rerun', 0, 1);
      await (await queue.getJob(id))?.remove();
      await redis.sadd(k.pending.fetch, id);
      // The crawl runs (its meta, and its partition's copy, which a done crawl's says done).
      await redis.hset(keys.crawl('rerun').meta, 'state', 'running');
      await redis.hset(k.part, 'state', 'running');
      await queue.add('fetch', { crawlId: 'rerun', url, depth: 1 }, { jobId: id });
      const fetchesBefore = site.requests.filter((r) => r.path === '/p/3.html').length;
      await waitDone(env, 'rerun');

      expect(site.requests.filter((r) => r.path === '/p/3.html').length).toBe(fetchesBefore + 1);
      const after = (await statusOf(env, 'rerun')).counters;
      expect(after).toMatchObject({ fetched: 7, parsed: 6, items: 5, written: 5 });
      expect(titles(readJsonl(out))).toEqual(pageTitles(5).sort());
    } finally {
      await stopFleet(fleet);
      await queue.close();
      await site.close();
    }
  });

  test('dead letters are listed with URL, stage, code, reason and attempts, and a replay fetches exactly the selected ones again', async () => {
    const site = await startChainSite({ pages: 8 });
    const { env, dir } = setup('replay');
    const fleet: Fleet = [];
    try {
      for (const n of [2, 5, 7]) site.failing.add(`/p/${n}.html`);
      const out = join(dir, 'items.jsonl');
      const spider = chainSpider(site.url, { retry: { attempts: 1 } });
      expect((await runCli(['seed', writeJson(dir, 'chain.json', spider), '--crawl-id', 'replay', '--sink', out], { env })).code).toBe(0);
      startFleet(env, fleet);
      await waitDone(env, 'replay', 90, fleet);
      expect(titles(readJsonl(out))).toEqual(['p 1', 'p 3', 'p 4', 'p 6', 'p 8']);

      const listed = await runCli(['dead-letters', '--crawl-id', 'replay', '--json'], { env });
      expect(listed.code).toBe(0);
      const dead = JSON.parse(listed.stdout) as { url: string; stage: string; code: string; reason: string; attempts: number }[];
      expect(dead.map((d) => [d.url, d.stage, d.code, d.attempts])).toEqual([2, 5, 7].map((n) => [`${site.url}/p/${n}.html`, 'fetch', 'ERR_HTTP_STATUS', 2]));
      expect(dead.every((d) => /503/.test(d.reason))).toBe(true);
      const table = await runCli(['dead-letters', '--crawl-id', 'replay'], { env });
      expect(table.stdout).toContain('3 dead letters: 3 ERR_HTTP_STATUS');

      // The site is back; replay two of the three, chosen by URL.
      site.failing.clear();
      const before = site.requests.length;
      const replayed = await runCli(['replay', '--crawl-id', 'replay', '--code', 'ERR_HTTP_STATUS', '--url-regex', '/p/[25]\\.html$'], { env });
      expect(replayed.code).toBe(0);
      expect(replayed.stdout).toContain('replayed 2 dead letters');
      await waitDone(env, 'replay', 90, fleet);
      expect(
        site.requests
          .slice(before)
          .map((r) => r.path)
          .sort(),
      ).toEqual(['/p/2.html', '/p/5.html']);
      expect(titles(readJsonl(out))).toEqual(['p 1', 'p 2', 'p 3', 'p 4', 'p 5', 'p 6', 'p 8']);
      const status = await statusOf(env, 'replay');
      expect(status.state).toBe('done');
      // A 503 counted as fetched the first time; its replay does not count it again.
      expect(status.counters).toMatchObject({ fetched: 9, parsed: 8, items: 7, written: 7, failed: 1, replayed: 2 });
      const left = JSON.parse((await runCli(['dead-letters', '--crawl-id', 'replay', '--json'], { env })).stdout) as { url: string }[];
      expect(left.map((d) => d.url)).toEqual([`${site.url}/p/7.html`]);
      // Replaying again finds nothing more to do for those two.
      expect((await runCli(['replay', '--crawl-id', 'replay', '--url-regex', '/p/[25]\\.html$'], { env })).stdout).toContain('replayed 0 dead letters');
      // A replayed URL that fails again is a dead letter again, and counted as failed again.
      site.failing.add('/p/7.html');
      expect((await runCli(['replay', '--crawl-id', 'replay', '--url-regex', '/p/7\\.html$'], { env })).stdout).toContain('replayed 1 dead letters');
      await waitDone(env, 'replay', 90, fleet);
      expect((await statusOf(env, 'replay')).counters).toMatchObject({ fetched: 9, failed: 1, replayed: 3 });
      const again = JSON.parse((await runCli(['dead-letters', '--crawl-id', 'replay', '--json'], { env })).stdout) as { url: string }[];
      expect(again.map((d) => d.url)).toEqual([`${site.url}/p/7.html`]);
    } finally {
      await stopFleet(fleet);
      await site.close();
    }
  });

  test("a replayed dead letter's write, and a redirect to a page archived already, archive nothing new: `archived` counts each URI once per run (the fuzzer's seed 1709182792:long)", async () => {
    const site = await startChainSite({ pages: 4 });
    const { env, dir } = setup('replay-warc');
    const fleet: Fleet = [];
    const warc = join(dir, 'warc');
    const responses = () =>
      readdirSync(warc)
        .filter((f) => f.endsWith('.warc.gz'))
        .map(
          (f) =>
            gunzipSync(readFileSync(join(warc, f)))
              .toString('latin1')
              .split('WARC-Type: response').length - 1,
        )
        .reduce((a, b) => a + b, 0);
    try {
      site.failing.add('/p/3.html');
      // /moved/2.html redirects to /p/2.html, which the crawl fetches too: one capture of that URI.
      const spider = chainSpider(site.url, { retry: { attempts: 1 }, startUrls: [`${site.url}/index.html`, `${site.url}/moved/2.html`] });
      const seeded = await runCli(['seed', writeJson(dir, 'chain.json', spider), '--crawl-id', 'replay-warc', '--sink', join(dir, 'items.jsonl'), '--warc', warc], { env });
      expect(seeded.code).toBe(0);
      startFleet(env, fleet);
      await waitDone(env, 'replay-warc', 90, fleet);
      // The index, its 4 pages (the 503 among them) and the redirect: 5 URIs, each archived once.
      expect((await statusOf(env, 'replay-warc')).counters).toMatchObject({ fetched: 6, failed: 1, archived: 5 });
      expect(responses()).toBe(5);
      // Replayed while it still fails, then once it answers: its URI is archived for this run already.
      for (const fixed of [false, true]) {
        if (fixed) site.failing.clear();
        expect((await runCli(['replay', '--crawl-id', 'replay-warc'], { env })).stdout).toContain('replayed 1 dead letters');
        await waitDone(env, 'replay-warc', 90, fleet);
      }
      expect((await statusOf(env, 'replay-warc')).counters).toMatchObject({ fetched: 6, failed: 0, replayed: 2, archived: 5 });
      expect(responses()).toBe(5);
    } finally {
      await stopFleet(fleet);
      await site.close();
    }
  });

  test("an open seeding run holds the crawl open while the workers finish all it admitted so far, though the seeder's clock is 2 minutes behind the fleet's", async () => {
    const site = await startChainSite({ pages: 1 });
    const { env, dir } = setup('seeding');
    const fleet: Fleet = [];
    const ctx = await createFleetContext({ env: loadEnv(env), name: 'seed-test' });
    const written = async () => (await getStatus(ctx.redis, ctx.keys, 'seeding'))?.counters.written;
    try {
      startFleet(env, fleet);
      const spider = validateSpider({ ...chainSpider(site.url), startUrls: [] }, 'test spider');
      const { layout } = await registerCrawl(ctx.redis, ctx.keys, 'seeding', spider, { kind: 'jsonl', path: join(dir, 'items.jsonl') });
      const admit = (from: number) =>
        admitAndEnqueue(
          ctx.redis,
          ctx.keys,
          ctx.queues,
          { ...layout, spider },
          Array.from({ length: 5 }, (_, i) => ({ url: `${site.url}/extra/${from + i}.html`, depth: 0, verdict: 'admit' as const })),
          { take: crawlTake(ctx.env.frontierWindow, layout, spider) },
        );
      // The seeder's machine is 2 minutes behind the workers' (whose reconciler runs every 500 ms):
      // a lease on its own clock would look lapsed to them at once.
      const realNow = Date.now.bind(Date);
      Date.now = () => realNow() - 120_000;
      try {
        await whileInjecting(ctx.redis, ctx.keys, layout, 'seed:skewed', async () => {
          await admit(1);
          // Between two batches the seeder is slow (a big URL file): the workers finish everything
          // it admitted so far, and the reconciler looks at the crawl several times meanwhile.
          for (let i = 0; i < 600 && (await written()) !== 5; i++) await new Promise((r) => setTimeout(r, 100));
          await new Promise((r) => setTimeout(r, 3000));
          expect(await ctx.redis.hget(ctx.keys.crawl('seeding').meta, 'state')).toBe('running');
          await admit(6);
        });
      } finally {
        Date.now = realNow;
      }
      await waitDone(env, 'seeding', 120, fleet);
      expect((await statusOf(env, 'seeding')).counters).toMatchObject({ seen: 10, fetched: 10, written: 10 });
    } finally {
      await stopFleet(fleet);
      await ctx.close();
      await site.close();
    }
  }, 400_000);
});
