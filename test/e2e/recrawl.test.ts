import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { startChangingSite } from '../fixtures/changing-site.mjs';
import { ROOT, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';
import { startMongo, type MongoServer } from '../helpers/mongo.js';

/** The articles spider: the index, every article, an item per article (keyed by its URL). */
function articlesSpider(base: string, recrawl: Record<string, number> = {}) {
  return {
    name: 'articles',
    startUrls: [`${base}/index.html`],
    allowedDomains: [base.replace('http://', '')],
    obeyRobotsTxt: false,
    allowPrivateAddresses: true,
    follow: [{ css: 'li a' }],
    items: [{ type: 'article', match: '/a/\\d+\\.html$', fields: { title: { css: 'h1', required: true }, version: { css: 'p.version', type: 'integer' } } }],
    recrawl,
  };
}

const lastLine = (stdout: string) => JSON.parse(stdout.trim().split('\n').pop()!);

/** The WARC files' response and revisit records, as python's warcio reads them, after `warcio check` passed on each. */
function warcCaptures(dir: string): { uri: string; type: string; profile: string | null; status: number }[] {
  const tools = process.env.WARC_TOOLS ?? '';
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.warc.gz'))
    .map((f) => join(dir, f));
  for (const file of files) expect(spawnSync(join(tools, 'warcio'), ['check', file]).status).toBe(0);
  const read = spawnSync(join(tools, 'python'), [join(ROOT, 'test', 'fixtures', 'reference', 'warc_records.py'), ...files], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return (JSON.parse(read.stdout) as { uri: string; type: string; profile: string | null; status: number }[]).filter((r) => r.type === 'response' || r.type === 'revisit');
}

describe('conditional recrawls (recrawl --crawl-id)', () => {
  let mongo: MongoServer;
  let client: MongoClient;
  const prefixes: string[] = [];
  beforeAll(async () => {
    mongo = await startMongo(`cf_recrawl_${process.pid}_${Date.now().toString(36)}`);
    client = await MongoClient.connect(mongo.url);
  });
  afterAll(async () => {
    await client?.close();
    await mongo?.stop();
    for (const p of prefixes) await dropPrefix(p);
  });

  test('10% of the pages changed: every known URL is asked for conditionally, 90% answer 304, only the changed pages are parsed and their items get a new changedAt, for under 20% of the bytes', async () => {
    const site = await startChangingSite({ pages: 100 });
    const prefix = uniquePrefix('recrawl');
    prefixes.push(prefix);
    const env = testEnv(prefix, { MONGO_URL: mongo.url });
    const dir = tempDir('recrawl');
    try {
      const spider = writeJson(dir, 'articles.json', articlesSpider(site.url));
      const warc = join(dir, 'warc');
      const first = await runCli(['crawl', spider, '--crawl-id', 'articles', '--mongo', mongo.url, '--warc', warc, '--json'], { env });
      expect(first.code).toBe(0);
      expect(lastLine(first.stdout).counters).toMatchObject({ fetched: 101, parsed: 101, items: 100, written: 100, notModified: 0, unchanged: 0 });
      const firstRun = { ...site.stats };
      expect(firstRun).toMatchObject({ requests: 101, conditional: 0, notModified: 0 });

      const articles = client.db().collection('article');
      const pages = client.db().collection('pages');
      const before = new Map((await articles.find({}).toArray()).map((a) => [a.url as string, a]));
      expect(before.size).toBe(100);
      const records = await pages.find({ crawlId: 'articles' }).toArray();
      expect(records).toHaveLength(101);
      expect(records.every((r) => r.etag && r.lastModified && /^[0-9a-f]{40}$/.test(r.hash) && r.intervalS === 24 * 3600)).toBe(true);

      // 10 of the 100 articles change.
      const changed = [3, 14, 25, 36, 47, 58, 69, 80, 91, 100];
      site.change(changed);
      site.resetStats();
      const recrawlStarted = new Date();
      const seeded = await runCli(['recrawl', '--crawl-id', 'articles'], { env });
      expect(seeded.code).toBe(0);
      expect(seeded.stderr).toContain('101 of 101 known URLs to fetch again');
      const second = await runCli(['crawl', spider, '--crawl-id', 'articles', '--mongo', mongo.url, '--warc', warc, '--json'], { env });
      expect(second.code).toBe(0);
      // The archive holds both runs: the first's 101 responses, then the 10 changed pages' responses
      // and 91 revisits of the server-not-modified profile.
      const captures = warcCaptures(warc);
      expect(captures.filter((c) => c.type === 'response' && c.status === 200)).toHaveLength(111);
      const notModified = captures.filter((c) => c.type === 'revisit');
      expect(notModified).toHaveLength(91);
      expect(notModified.every((c) => c.status === 304 && c.profile === 'http://netpreserve.org/warc/1.1/revisit/server-not-modified')).toBe(true);
      expect(lastLine(second.stdout).counters).toMatchObject({ fetched: 101, notModified: 91, unchanged: 0, parsed: 10, items: 10, written: 10, failed: 0 });

      // every known URL was asked for with its validators; the unchanged ones answered 304
      expect(site.stats).toMatchObject({ requests: 101, conditional: 101, notModified: 91 });
      expect(site.stats.bodyBytes).toBeLessThanOrEqual(0.2 * firstRun.bodyBytes);

      const after = new Map((await articles.find({}).toArray()).map((a) => [a.url as string, a]));
      for (const [url, item] of after) {
        const id = Number(/\/a\/(\d+)\.html$/.exec(url)![1]);
        if (changed.includes(id)) {
          expect(item.version).toBe(2);
          expect(+item.changedAt).toBeGreaterThanOrEqual(+recrawlStarted);
        } else {
          expect(item.version).toBe(1);
          expect(+item.changedAt).toBe(+before.get(url)!.changedAt);
        }
      }

      // intervals adapt: halved for a page that changed, doubled for one that did not
      const byUrl = new Map((await pages.find({ crawlId: 'articles' }).toArray()).map((r) => [r.url as string, r]));
      expect(byUrl.get(`${site.url}/a/3.html`)).toMatchObject({ intervalS: 12 * 3600 });
      expect(byUrl.get(`${site.url}/a/4.html`)).toMatchObject({ intervalS: 48 * 3600 });
      expect(+new Date(byUrl.get(`${site.url}/a/4.html`)!.lastSeenAt)).toBeGreaterThanOrEqual(+recrawlStarted);
      expect(byUrl.get(`${site.url}/a/4.html`)!.changedAt).toBe(records.find((r) => r.url === `${site.url}/a/4.html`)!.changedAt);

      // --due: nothing is due yet, so nothing is fetched
      site.resetStats();
      expect((await runCli(['recrawl', '--crawl-id', 'articles', '--due'], { env })).stderr).toContain('0 of 101 known URLs');
      const third = await runCli(['crawl', spider, '--crawl-id', 'articles', '--mongo', mongo.url, '--json'], { env });
      expect(lastLine(third.stdout).counters).toMatchObject({ fetched: 0, skipped: 101 });
      expect(site.stats.requests).toBe(0);
    } finally {
      await site.close();
    }
  });

  test('a server that ignores validators: a body like the last one counts unchanged and is not parsed; records kept beside a file sink', async () => {
    const site = await startChangingSite({ pages: 20, honour: false });
    const prefix = uniquePrefix('recrawl-file');
    prefixes.push(prefix);
    const env = testEnv(prefix);
    const dir = tempDir('recrawl');
    try {
      const spider = writeJson(dir, 'articles.json', articlesSpider(site.url, { intervalHours: 2, minIntervalHours: 1, maxIntervalHours: 3 }));
      const out = join(dir, 'articles.jsonl');
      expect((await runCli(['crawl', spider, '--crawl-id', 'files', '--out', out, '--json'], { env })).code).toBe(0);
      expect(readJsonl(join(dir, 'articles.pages.jsonl'))).toHaveLength(21);
      site.change([5, 6]);
      expect((await runCli(['recrawl', '--crawl-id', 'files'], { env })).code).toBe(0);
      const second = await runCli(['crawl', spider, '--crawl-id', 'files', '--out', out, '--json'], { env });
      expect(lastLine(second.stdout).counters).toMatchObject({ fetched: 21, notModified: 0, unchanged: 19, parsed: 2 });
      // the newest line of each URL: its interval within the bounds (3 h at most, 1 h at least)
      const latest = new Map(readJsonl(join(dir, 'articles.pages.jsonl')).map((r) => [r.url as string, r]));
      expect(latest.size).toBe(21);
      expect(latest.get(`${site.url}/a/5.html`)).toMatchObject({ intervalS: 3600 });
      expect(latest.get(`${site.url}/a/7.html`)).toMatchObject({ intervalS: 3 * 3600 });
      expect(readFileSync(join(dir, 'articles.pages.jsonl'), 'utf8').trim().split('\n')).toHaveLength(42);
    } finally {
      await site.close();
    }
  });

  test('recrawl refuses, exit 2 with the reason: a crawl whose spider kept no page records, and an unknown crawl', async () => {
    const prefix = uniquePrefix('recrawl-refuse');
    prefixes.push(prefix);
    const env = testEnv(prefix);
    const unknown = await runCli(['recrawl', '--crawl-id', 'nope'], { env });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('there is no crawl nope');

    const site = await startChangingSite({ pages: 3 });
    const dir = tempDir('recrawl');
    try {
      const { recrawl: _none, ...plain } = articlesSpider(site.url);
      const spider = writeJson(dir, 'plain.json', plain);
      expect((await runCli(['crawl', spider, '--crawl-id', 'plain', '--out', join(dir, 'plain.jsonl')], { env })).code).toBe(0);
      const refused = await runCli(['recrawl', '--crawl-id', 'plain'], { env });
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain('has no "recrawl" settings');
      // nothing was reset: the crawl is still there, done
      expect(JSON.parse((await runCli(['status', '--crawl-id', 'plain', '--json'], { env })).stdout)).toMatchObject({ state: 'done' });
    } finally {
      await site.close();
    }
  });
});
