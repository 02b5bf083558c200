import { join } from 'node:path';
import { catalogueSpider, groundTruth, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { Redis } from 'ioredis';
import { REDIS_URL, comparable, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

const FIELDS = ['type', 'url', 'link', 'title', 'price', 'sku', 'category', 'tags'];
const SHAPE = siteShape(120, 20);

/** The JSON log lines of a run. */
const logLines = (stderr: string) =>
  stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('crawlfleet crawl: the parse stage in worker threads', () => {
  let site: Awaited<ReturnType<typeof startCatalogueSite>>;
  const prefix = uniquePrefix('pthread');
  const dir = tempDir('pthread');

  beforeAll(async () => {
    site = await startCatalogueSite(SHAPE);
  });
  afterAll(async () => {
    await site.close();
    await dropPrefix(prefix);
  });

  /** The crawl's items are exactly the site's, and its final status counts each page once. */
  function expectGroundTruth(crawlId: string, out: string, stdout: string) {
    const truth = groundTruth(site.url, SHAPE);
    const items = readJsonl(out);
    expect(comparable(items, FIELDS)).toEqual(comparable([...truth.products, ...truth.listings], FIELDS));
    expect(JSON.parse(stdout.trim().split('\n').pop()!)).toMatchObject({
      crawlId,
      state: 'done',
      counters: {
        fetched: truth.paths.size,
        parsed: truth.paths.size - truth.failedPaths.length,
        items: items.length,
        written: items.length,
        invalid: truth.invalid,
        failed: truth.failedPaths.length,
      },
    });
  }

  test.each([
    { name: '--parser-threads 1', threads: 1, ids: [1] },
    { name: '--parser-threads 2', threads: 2, ids: [1, 2] },
    { name: '--parser-threads 0', threads: 0, ids: [] },
    { name: 'by default', threads: undefined, ids: [1] },
  ])('$name: parser threads $ids, exactly the ground truth', async ({ threads, ids }) => {
    const crawlId = `pt-${threads ?? 'default'}`;
    const spider = writeJson(dir, `${crawlId}.json`, catalogueSpider(site.url));
    const out = join(dir, `${crawlId}.jsonl`);
    const args = ['crawl', spider, '--crawl-id', crawlId, '--out', out, '--json', '--concurrency', '16', ...(threads === undefined ? [] : ['--parser-threads', String(threads)])];
    const run = await runCli(args, { env: testEnv(prefix) });
    expect(run.stderr).not.toMatch(/"level":"(error|fatal)"/);
    expect(run.code).toBe(0);

    // Each thread announces itself in the process's own pino stream, with its thread id.
    const lines = logLines(run.stderr);
    const ready = lines.filter((l) => l.msg === 'parser thread ready');
    expect(ready.map((l) => l.threadId).sort()).toEqual(ids);
    const pid = lines[0]!.pid;
    for (const l of ready) expect(l).toMatchObject({ level: 'info', name: 'crawl', pid, thread: 'parser', stage: 'parse', concurrency: threads === 2 ? 2 : 4 });

    expectGroundTruth(crawlId, out, run.stdout);
  });

  test('PARSE_IN_FETCHER=1: the thread runs the fetcher, which parses; no parse job is ever added; exactly the ground truth', async () => {
    const crawlId = 'pt-fused';
    const spider = writeJson(dir, `${crawlId}.json`, catalogueSpider(site.url));
    const out = join(dir, `${crawlId}.jsonl`);
    // A prefix of its own: the other tests' crawls added parse jobs to theirs.
    const ownPrefix = uniquePrefix('pthread-fused');
    const run = await runCli(['crawl', spider, '--crawl-id', crawlId, '--out', out, '--json', '--concurrency', '16'], { env: testEnv(ownPrefix, { PARSE_IN_FETCHER: '1' }) });
    expect(run.code).toBe(0);
    const ready = logLines(run.stderr).filter((l) => String(l.msg).endsWith('thread ready'));
    expect(ready).toEqual([expect.objectContaining({ msg: 'fetcher thread ready', thread: 'fetcher', stage: 'fetch', concurrency: 16 })]);

    // BullMQ's event streams name every job added: fetch jobs, and not one parse job.
    const redis = new Redis(REDIS_URL);
    try {
      const jobIdsIn = async (queue: string) => {
        const ids = new Set<string>();
        for (const key of await redis.keys(`${ownPrefix}:*:${queue}:events`))
          for (const [, fields] of await redis.xrange(key, '-', '+')) {
            const at = fields.indexOf('jobId');
            if (at >= 0) ids.add(fields[at + 1]!);
          }
        return ids;
      };
      expect((await jobIdsIn('fetch')).size).toBeGreaterThan(0);
      expect([...(await jobIdsIn('parse'))]).toEqual([]);
    } finally {
      redis.disconnect();
      await dropPrefix(ownPrefix);
    }

    expectGroundTruth(crawlId, out, run.stdout);
  });

  test('--parser-threads must be a whole number', async () => {
    const run = await runCli(['crawl', 'spider.json', '--parser-threads', '-1'], { env: testEnv(prefix) });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--parser-threads must be a whole number (0 or more)');
  });
});
