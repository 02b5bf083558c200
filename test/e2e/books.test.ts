import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BOOKS_ARCHIVE, serveFolder, unpack } from '../fixtures/static-site.mjs';
import { booksTruth, expectBooksItems } from '../helpers/books-truth.js';
import { ROOT, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, writeJson, deadLetters } from '../helpers/cli.js';

describe('the real books.toscrape.com pages', () => {
  test('980 listing items and 200 book items, exactly; the 404s are failed with their reason and the crawl is done', async () => {
    const root = unpack(BOOKS_ARCHIVE);
    const site = await serveFolder(root);
    const prefix = uniquePrefix('books');
    const dir = tempDir('books');
    const env = testEnv(prefix);
    try {
      const example = JSON.parse(readFileSync(join(ROOT, 'examples', 'books.json'), 'utf8'));
      const spiderJson = JSON.stringify(example).replaceAll('127.0.0.1:8080', site.url.replace('http://', ''));
      const spider = writeJson(dir, 'books.json', JSON.parse(spiderJson));
      const out = join(dir, 'items.jsonl');
      const run = await runCli(['crawl', spider, '--crawl-id', 'books-real', '--out', out, '--json', '--concurrency', '16'], { env });
      expect(run.code).toBe(0);

      const truth = booksTruth(root, site.url);
      expect(truth.listings).toHaveLength(980);
      expect(truth.details).toHaveLength(200);
      const items = readJsonl(out);
      expectBooksItems(items, truth);
      // A title with a double quote sits in a single-quoted attribute; it must come through whole.
      expect(items.some((i) => typeof i.title === 'string' && i.title.includes('"'))).toBe(true);

      // 780 listed books (and some recommended ones) and page-50.html are not in the copy: each is failed, with its reason.
      const status = JSON.parse(run.stdout.trim().split('\n').pop()!);
      expect(status.state).toBe('done');
      const pages = 49 + 1 + truth.detailLinks.size;
      const missing = truth.detailLinks.size - 200 + 1;
      expect(status.counters).toMatchObject({ seen: pages, fetched: pages, parsed: 249, items: 1180, written: 1180, failed: missing, invalid: 0, skipped: truth.offSite.size, blocked: 0 });
      const { Redis } = await import('ioredis');
      const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
      try {
        const dead = await deadLetters(redis, prefix, 'books-real');
        expect(dead).toHaveLength(missing);
        expect(new Set(dead.map((d) => d.reason))).toEqual(new Set(['HTTP 404']));
        expect(dead.map((d) => d.url)).toContain(`${site.url}/catalogue/page-50.html`);
      } finally {
        redis.disconnect();
      }
    } finally {
      await site.close();
      await dropPrefix(prefix);
    }
  });
});
