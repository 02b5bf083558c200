import { join } from 'node:path';
import { catalogueSpider, groundTruth, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { comparable, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

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

    const truth = groundTruth(site.url, SHAPE);
    const items = readJsonl(out);
    expect(comparable(items, FIELDS)).toEqual(comparable([...truth.products, ...truth.listings], FIELDS));
    const final = JSON.parse(run.stdout.trim().split('\n').pop()!);
    expect(final).toMatchObject({
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
  });

  test('--parser-threads must be a whole number', async () => {
    const run = await runCli(['crawl', 'spider.json', '--parser-threads', '-1'], { env: testEnv(prefix) });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--parser-threads must be a whole number (0 or more)');
  });
});
