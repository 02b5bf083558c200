import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { BOOKS_ARCHIVE, serveFolder, unpack } from '../fixtures/static-site.mjs';
import { API_KEY, SESSION, record, startMembersSite } from '../fixtures/members-site.mjs';
import { booksTruth, expectBooksItems } from '../helpers/books-truth.js';
import { REDIS_URL, ROOT, comparable, deadLetters, dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix } from '../helpers/cli.js';

/** A spider module copied out of the repository (no node_modules beside it), its site's URL filled in. */
function spiderCopy(source: string, siteUrl: string, dir: string, name = source.split('/').pop()!): string {
  const path = join(dir, name);
  writeFileSync(path, readFileSync(join(ROOT, source), 'utf8').replaceAll('http://127.0.0.1:8080', siteUrl).replaceAll('127.0.0.1:8080', siteUrl.replace('http://', '')));
  return path;
}

async function deadLettersOf(prefix: string, crawlId: string): Promise<Array<{ url: string; stage: string; code: string; reason: string; data?: Record<string, unknown> }>> {
  const redis = new Redis(REDIS_URL);
  try {
    return (await deadLetters(redis, prefix, crawlId)) as unknown as Array<{ url: string; stage: string; code: string; reason: string; data?: Record<string, unknown> }>;
  } finally {
    redis.disconnect();
  }
}

const lastJson = (stdout: string) => JSON.parse(stdout.trim().split('\n').pop()!);

describe('code spiders', () => {
  test('a TypeScript books spider on a fleet of separate processes: the declarative items exactly, plus the computed price with tax', async () => {
    const root = unpack(BOOKS_ARCHIVE);
    const site = await serveFolder(root);
    const prefix = uniquePrefix('code-books');
    const dir = tempDir('code-books');
    const env = testEnv(prefix);
    const workers: ReturnType<typeof spawnCli>[] = [];
    try {
      const spider = spiderCopy('examples/books.ts', site.url, dir);
      const out = join(dir, 'items.jsonl');
      const seeded = await runCli(['seed', spider, '--sink', out, '--crawl-id', 'code-books'], { env });
      expect(seeded.stderr).not.toMatch(/"level":"(error|fatal)"/);
      expect(seeded.code).toBe(0);
      for (const stage of ['fetcher', 'parser', 'writer']) workers.push(spawnCli(['worker', stage, '--concurrency', '8'], { env, cwd: dir }));
      const waited = await runCli(['wait', '--crawl-id', 'code-books', '--timeout', '150'], { env, timeoutMs: 160_000 });
      expect(waited.code).toBe(0);

      const truth = booksTruth(root, site.url);
      const items = readJsonl(out);
      expectBooksItems(items, truth, (d) => ({ priceInclTax: Math.round(d.price * 120) / 100 }));
      expect(items).toHaveLength(1180);
      expect(items.find((i) => i.title === 'A Light in the Attic' && i.type === 'book')).toMatchObject({ price: 51.77, priceInclTax: 62.12, spider: 'books', crawlId: 'code-books' });

      const status = lastJson((await runCli(['status', '--crawl-id', 'code-books', '--json'], { env })).stdout);
      expect(status).toMatchObject({ state: 'done', spiderModule: { path: spider, hash: expect.stringMatching(/^[0-9a-f]{16}$/) } });
      expect(status.counters).toMatchObject({ parsed: 249, items: 1180, written: 1180, invalid: 0 });
    } finally {
      for (const w of workers) w.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.result));
      await site.close();
      await dropPrefix(prefix);
    }
  });

  test('request hooks: a site that answers 401 without a header and a cookie is crawled completely, and link metadata reaches both hooks', async () => {
    const site = await startMembersSite({ pages: 30 });
    const prefix = uniquePrefix('code-members');
    const dir = tempDir('code-members');
    try {
      expect((await fetch(`${site.url}/page/1.html`)).status).toBe(401);
      site.seen.length = 0;
      const spider = spiderCopy('test/fixtures/spiders/members.ts', site.url, dir);
      const out = join(dir, 'items.jsonl');
      const run = await runCli(['crawl', spider, '--crawl-id', 'members', '--out', out, '--json', '--quiet'], { env: testEnv(prefix) });
      expect(run.code).toBe(0);
      const ids = Array.from({ length: 30 }, (_, i) => i + 1);
      const items = readJsonl(out);
      expect(
        comparable(
          items.filter((i) => i.type === 'member'),
          ['id', 'name', 'value', 'source'],
        ),
      ).toEqual(
        comparable(
          ids.map((k) => ({ id: k, name: record(k).name, value: record(k).value, source: 'members' })),
          ['id', 'name', 'value', 'source'],
        ),
      );
      expect(
        comparable(
          items.filter((i) => i.type === 'note'),
          ['id', 'note', 'url'],
        ),
      ).toEqual(
        comparable(
          ids.map((k) => ({ id: k, note: record(k).note, url: `${site.url}/page/${k}/detail.html` })),
          ['id', 'note', 'url'],
        ),
      );
      // Every request carried the key and the cookie; a detail page's request carried its link's metadata.
      expect(site.seen.filter((r) => r.apiKey !== API_KEY || r.cookie !== `session=${SESSION}`)).toEqual([]);
      for (const k of ids) expect(site.seen.filter((r) => r.path === `/page/${k}/detail.html`).map((r) => r.from)).toEqual([String(k)]);
      expect(site.seen).toHaveLength(1 + 30 * 2);
      expect(lastJson(run.stdout)).toMatchObject({ state: 'done', counters: { fetched: 61, items: 60, written: 60, failed: 0, invalid: 0 } });
    } finally {
      await site.close();
      await dropPrefix(prefix);
    }
  });

  test("request hooks read and set the session's cookies: the login cookie set once goes with every request after, from the fleet's session", async () => {
    const site = await startMembersSite({ pages: 10 });
    const prefix = uniquePrefix('code-session');
    const dir = tempDir('code-session');
    try {
      const spider = spiderCopy('test/fixtures/spiders/members-session.ts', site.url, dir);
      const out = join(dir, 'items.jsonl');
      const run = await runCli(['crawl', spider, '--crawl-id', 'members-session', '--out', out, '--json', '--quiet'], { env: testEnv(prefix) });
      expect(run.code).toBe(0);
      expect(lastJson(run.stdout)).toMatchObject({ state: 'done', counters: { fetched: 11, items: 10, written: 10, failed: 0 } });
      expect(
        readJsonl(out)
          .map((i) => i.value)
          .sort((a, b) => Number(a) - Number(b)),
      ).toEqual(Array.from({ length: 10 }, (_, i) => record(i + 1).value));
      // One request at a time: the first set the cookie into the session, before it went; all 11 carried it once.
      expect(site.seen.map((r) => r.from)).toEqual(['set', ...Array.from({ length: 10 }, () => 'kept')]);
      expect(site.seen.filter((r) => r.cookie !== `session=${SESSION}`)).toEqual([]);
    } finally {
      await site.close();
      await dropPrefix(prefix);
    }
  });

  test('a parse hook that throws on 1 page of 50: that page is dead-lettered with the message and the line, the 49 others are stored, the crawl is done', async () => {
    const site = await startMembersSite({ pages: 50, auth: false });
    const prefix = uniquePrefix('code-failing');
    const dir = tempDir('code-failing');
    try {
      const spider = spiderCopy('test/fixtures/spiders/failing.ts', site.url, dir);
      const line =
        readFileSync(spider, 'utf8')
          .split('\n')
          .findIndex((l) => l.includes('the line the dead letter names')) + 1;
      const out = join(dir, 'items.jsonl');
      const run = await runCli(['crawl', spider, '--crawl-id', 'failing', '--out', out, '--json', '--quiet'], { env: testEnv(prefix) });
      expect(run.code).toBe(0);
      const items = readJsonl(out);
      expect(items.map((i) => i.id).sort((a, b) => Number(a) - Number(b))).toEqual(Array.from({ length: 50 }, (_, i) => i + 1).filter((k) => k !== 17));
      for (const item of items) expect(item.value).toBe(record(Number(item.id)).value);
      expect(lastJson(run.stdout)).toMatchObject({ state: 'done', counters: { parsed: 50, items: 49, written: 49, failed: 1 } });
      const dead = await deadLettersOf(prefix, 'failing');
      expect(dead).toEqual([
        expect.objectContaining({ url: `${site.url}/page/17.html`, stage: 'parse', code: 'ERR_SPIDER_HOOK', reason: `parse hook threw at failing.ts:${line}: TypeError: page 17 has no value layout` }),
      ]);
    } finally {
      await site.close();
      await dropPrefix(prefix);
    }
  });

  test('item hooks and schemas drop items as invalid with a sample of reasons in status; a request hook that throws dead-letters its URL', async () => {
    const site = await startMembersSite({ pages: 50, auth: false });
    const prefix = uniquePrefix('code-picky');
    const dir = tempDir('code-picky');
    try {
      const spider = spiderCopy('test/fixtures/spiders/picky.ts', site.url, dir);
      const source = readFileSync(spider, 'utf8').split('\n');
      const itemLine = source.findIndex((l) => l.includes('every tenth member is held back')) + 1;
      const requestLine = source.findIndex((l) => l.includes('refusing page 33')) + 1;
      const out = join(dir, 'items.jsonl');
      const run = await runCli(['crawl', spider, '--crawl-id', 'picky', '--out', out, '--json', '--quiet'], { env: testEnv(prefix) });
      expect(run.code).toBe(0);
      // 33: its request hook threw; 10, 20, ..., 50: the item hook; 41-49: value 3k >= 120 fails the schema.
      const kept = Array.from({ length: 50 }, (_, i) => i + 1).filter((k) => k !== 33 && k % 10 !== 0 && k < 40);
      const items = readJsonl(out);
      expect(comparable(items, ['id', 'name', 'value'])).toEqual(
        comparable(
          kept.map((k) => ({ id: k, name: record(k).name, value: record(k).value })),
          ['id', 'name', 'value'],
        ),
      );
      const status = lastJson(run.stdout);
      expect(status).toMatchObject({ state: 'done', counters: { fetched: 50, parsed: 50, items: kept.length, written: kept.length, invalid: 14, failed: 1 } });
      expect(status.invalidReasons).toEqual([
        { reason: 'member: value: Too big: expected number to be <=119', count: 9 },
        { reason: `member: item hook: every tenth member is held back (picky.ts:${itemLine})`, count: 5 },
      ]);
      expect(await deadLettersOf(prefix, 'picky')).toEqual([
        expect.objectContaining({ url: `${site.url}/page/33.html`, stage: 'fetch', code: 'ERR_SPIDER_HOOK', reason: `request hook threw at picky.ts:${requestLine}: refusing page 33` }),
      ]);
    } finally {
      await site.close();
      await dropPrefix(prefix);
    }
  });

  test('a parser whose copy of the module differs from the seeded one dead-letters every page and stores nothing; the seeded copy back and a replay store them all', async () => {
    const site = await startMembersSite({ pages: 20, auth: false });
    const prefix = uniquePrefix('code-version');
    const dir = tempDir('code-version');
    const env = testEnv(prefix, { SPIDER_DEPLOY_WAIT_MS: '0' });
    const workers: ReturnType<typeof spawnCli>[] = [];
    try {
      const spider = spiderCopy('test/fixtures/spiders/failing.ts', site.url, dir, 'versioned.ts');
      const seededCopy = join(dir, 'seeded.ts.txt');
      copyFileSync(spider, seededCopy);
      const out = join(dir, 'items.jsonl');
      const pages = Array.from({ length: 20 }, (_, i) => `${site.url}/page/${i + 1}.html`);
      expect((await runCli(['seed', spider, ...pages, '--sink', out, '--crawl-id', 'versioned'], { env })).code).toBe(0);
      const seededHash = lastJson((await runCli(['status', '--crawl-id', 'versioned', '--json'], { env })).stdout).spiderModule.hash;
      // The fetcher loads the seeded copy; then the file changes, and the parser starts on the new one.
      workers.push(spawnCli(['worker', 'fetcher'], { env }));
      for (let i = 0; i < 100 && !site.seen.some((r) => r.path === '/index.html'); i++) await new Promise((r) => setTimeout(r, 100));
      await new Promise((r) => setTimeout(r, 500));
      writeFileSync(spider, readFileSync(spider, 'utf8').replace('value: valueFrom(', 'version: 2, value: valueFrom('));
      workers.push(spawnCli(['worker', 'parser'], { env }), spawnCli(['worker', 'writer'], { env }));
      expect((await runCli(['wait', '--crawl-id', 'versioned', '--timeout', '60'], { env, timeoutMs: 70_000 })).code).toBe(0);

      const dead = await deadLettersOf(prefix, 'versioned');
      expect(dead).toHaveLength(21);
      for (const d of dead) {
        expect(d).toMatchObject({ stage: 'parse', code: 'ERR_SPIDER_VERSION' });
        // enough to replay it, without the page's body or its response headers
        expect(Object.keys(d.data ?? {}).sort()).toEqual(['contentType', 'crawlId', 'depth', 'fetchedAt', 'finalUrl', 'status', 'url']);
        expect(d.reason).toMatch(
          new RegExp(`^cannot load|spider module ${spider.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} on this worker has hash [0-9a-f]{16}, but the crawl was seeded with ${seededHash}`),
        );
      }
      const status = lastJson((await runCli(['status', '--crawl-id', 'versioned', '--json'], { env })).stdout);
      expect(status.counters).toMatchObject({ items: 0, written: 0, failed: 21 });

      // The seeded copy back: a replay runs the pages again, and every item is stored.
      copyFileSync(seededCopy, spider);
      await new Promise((r) => setTimeout(r, 5500));
      expect((await runCli(['replay', '--crawl-id', 'versioned', '--code', 'ERR_SPIDER_VERSION'], { env })).code).toBe(0);
      expect((await runCli(['wait', '--crawl-id', 'versioned', '--timeout', '60'], { env, timeoutMs: 70_000 })).code).toBe(0);
      const items = readJsonl(out);
      expect(items.map((i) => i.id).sort((a, b) => Number(a) - Number(b))).toEqual(Array.from({ length: 20 }, (_, i) => i + 1).filter((k) => k !== 17));
      expect(items.some((i) => 'version' in i)).toBe(false);
    } finally {
      for (const w of workers) w.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.result));
      await site.close();
      await dropPrefix(prefix);
    }
  });
});
