import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as cheerio from 'cheerio';
import { BOOKS_ARCHIVE, serveFolder, unpack } from '../fixtures/static-site.mjs';
import { booksTruth } from '../helpers/books-truth.js';
import { defaultShellSpider } from '../../services/cli/src/commands/shell.js';
import { ROOT, runCli, tempDir, writeJson } from '../helpers/cli.js';

// No REDIS_URL needed: shell stores nothing. An unreachable Redis proves it.
const env = { ...process.env, LOG_LEVEL: 'warn', REDIS_URL: 'redis://127.0.0.1:1' };

describe('crawlfleet shell URL', () => {
  const root = unpack(BOOKS_ARCHIVE);
  const dir = tempDir('shell');
  let site: { url: string; close: () => Promise<void> };
  let spider: string;
  let truth: ReturnType<typeof booksTruth>;

  beforeAll(async () => {
    site = await serveFolder(root);
    const example = readFileSync(join(ROOT, 'examples', 'books.json'), 'utf8');
    spider = writeJson(dir, 'books.json', JSON.parse(example.replaceAll('127.0.0.1:8080', site.url.replace('http://', ''))));
    truth = booksTruth(root, site.url);
  });
  afterAll(() => site.close());

  test("a code spider (examples/books.ts): its parse hook's book item, with the computed price including tax", async () => {
    const book = truth.details.find((d) => d.url.endsWith('/a-light-in-the-attic_1000/index.html'))!;
    const code = join(dir, 'books.ts');
    writeFileSync(code, readFileSync(join(ROOT, 'examples', 'books.ts'), 'utf8').replaceAll('127.0.0.1:8080', site.url.replace('http://', '')));
    const run = await runCli(['shell', book.url, '--spider', code, '--json'], { env });
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout);
    const inStock = Number(/\((\d+) available\)/.exec(book.availability)![1]);
    expect(out.items).toEqual([{ ...book, inStock, priceInclTax: 62.12, spider: 'books', crawlId: 'shell', fetchedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) }]);
    expect(out).toMatchObject({ invalid: 0, invalidReasons: [] });
  });

  test('a book page with examples/books.json: exactly its book item (--json)', async () => {
    const book = truth.details.find((d) => d.url.endsWith('/a-light-in-the-attic_1000/index.html'))!;
    const run = await runCli(['shell', book.url, '--spider', spider, '--json'], { env });
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout);
    expect(Object.keys(out).sort()).toEqual(['contentType', 'finalUrl', 'invalid', 'invalidReasons', 'items', 'links', 'status', 'url']);
    expect(out).toMatchObject({ url: book.url, finalUrl: book.url, status: 200, contentType: 'text/html; charset=utf-8', invalid: 0, invalidReasons: [] });
    const inStock = Number(/\((\d+) available\)/.exec(book.availability)![1]);
    expect(out.items).toEqual([{ ...book, inStock, spider: 'books', crawlId: 'shell', fetchedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) }]);
    // the book pages it recommends, as the follow rule picks them
    const $ = cheerio.load(readFileSync(join(root, new URL(book.url).pathname), 'utf8'));
    expect(out.links).toEqual(
      $('article.product_pod h3 a')
        .toArray()
        .map((a) => new URL($(a).attr('href')!, book.url).href),
    );
  });

  test('a catalogue page: its 20 listing items and its links, next page first', async () => {
    const page = `${site.url}/catalogue/page-2.html`;
    const run = await runCli(['shell', page, '--spider', spider, '--json'], { env });
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout);
    // books-truth lists index.html's 20 books, then page-2's
    const listings = truth.listings.slice(20, 40);
    expect(out.items.map(({ type, link, title, price, rating }: Record<string, unknown>) => ({ type, link, title, price, rating }))).toEqual(listings);
    expect(out.links).toEqual([`${site.url}/catalogue/page-3.html`, ...listings.map((l) => l.link)]);
    expect(out.invalid).toBe(0);
  });

  test('the human output: a header, the items, the links and the invalid count', async () => {
    const run = await runCli(['shell', `${site.url}/index.html`, '--spider', spider], { env });
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^status: +200\nfinal URL: +http:\/\/127\.0\.0\.1:\d+\/index\.html\ncontent type: +text\/html; charset=utf-8\nbytes: +\d+\ntime: +\d+ ms\n/);
    expect(run.stdout).toContain('\nitems (20):\n[\n  {\n    "type": "listing",');
    expect(run.stdout).toContain(`\nlinks (21):\n  ${site.url}/catalogue/page-2.html\n`);
    expect(run.stdout).toMatch(/\ninvalid: 0\n$/);
  });

  test('an HTTP error is shown with exit 0, and the page is not parsed', async () => {
    const run = await runCli(['shell', `${site.url}/catalogue/page-50.html`, '--spider', spider, '--json'], { env });
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ status: 404, items: [], links: [], invalid: 0 });
    const human = await runCli(['shell', `${site.url}/catalogue/page-50.html`, '--spider', spider], { env });
    expect(human.stdout).toContain('not parsed: HTTP 404; the fleet gives it up (a dead letter)');
  });

  test('without --spider: private addresses are refused (exit 1), as the SSRF guard refuses them', async () => {
    const run = await runCli(['shell', `${site.url}/index.html`], { env });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('a private, loopback or link-local address');
    expect(run.stdout).toBe('');
  });

  test('the default spider follows every a[href], extracts no items and refuses private addresses', async () => {
    expect(defaultShellSpider(`${site.url}/`)).toMatchObject({ follow: [{ css: 'a[href]' }], items: [], allowPrivateAddresses: false, allowedAddresses: [] });
    // the same rules, with private addresses allowed: every link once, in document order
    const permissive = writeJson(dir, 'permissive.json', { name: 'p', allowPrivateAddresses: true, follow: [{ css: 'a[href]' }] });
    const run = await runCli(['shell', `${site.url}/catalogue/page-2.html`, '--spider', permissive, '--json'], { env });
    const out = JSON.parse(run.stdout);
    expect(out.items).toEqual([]);
    const $ = cheerio.load(readFileSync(join(root, 'catalogue', 'page-2.html'), 'utf8'));
    const hrefs = [
      ...new Set(
        $('a[href]')
          .toArray()
          .map((a) => new URL($(a).attr('href')!, `${site.url}/catalogue/page-2.html`).href),
      ),
    ];
    expect(out.links).toEqual(hrefs);
  });

  test('a network error exits 1; a bad spider or URL exits 2', async () => {
    const refused = await runCli(['shell', 'http://127.0.0.1:1/', '--spider', spider], { env });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('ECONNREFUSED');
    const bad = writeJson(dir, 'bad.json', { name: 'bad', folow: [] });
    const badSpider = await runCli(['shell', `${site.url}/index.html`, '--spider', bad], { env });
    expect(badSpider.code).toBe(2);
    expect(badSpider.stderr).toContain(`${bad}: (top level): unknown key(s) "folow"`);
    expect((await runCli(['shell', 'ftp://example.com/'], { env })).code).toBe(2);
    expect((await runCli(['shell', 'not a url'], { env })).code).toBe(2);
  });
});
