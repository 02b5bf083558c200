import { gzipSync } from 'node:zlib';
import { validateSpider } from '@crawlfleet/core';
import { newSitemapWalkStats, readSitemap, sitemapEntries, sitemapLastmod, sitemapSkipped, type SitemapItem } from '@crawlfleet/fetch';
import { decodeRequest, encodeRequest } from '@crawlfleet/frontier';
import { startServer } from '../fixtures/http-server.mjs';

/** Every item of a body given as these chunks. */
async function items(chunks: (string | Buffer)[], url = 'http://a.test/sitemap.xml', maxBytes?: number): Promise<SitemapItem[]> {
  const out: SitemapItem[] = [];
  for await (const item of readSitemap(
    chunks.map((c) => (typeof c === 'string' ? Buffer.from(c) : c)),
    url,
    maxBytes,
  ))
    out.push(item);
  return out;
}

/** A body cut into pieces of `size` bytes, to cross every token boundary. */
function pieces(body: string | Buffer, size: number): Buffer[] {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(bytes.subarray(i, i + size));
  return out;
}

const URLSET = `<?xml version="1.0" encoding="UTF-8"?>
<?xml-stylesheet type="text/xsl" href="/sitemap.xsl"?>
<!-- generated -->
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url><loc> http://a.test/x?a=1&amp;b=2 </loc><lastmod>2024-05-01</lastmod><changefreq>daily</changefreq>
    <image:image><image:loc>http://a.test/photo.png</image:loc></image:image></url>
  <url><lastmod>2024-05-01T10:30:00+02:00</lastmod><loc><![CDATA[http://a.test/ü?q=<1>]]></loc></url>
  <url><loc>http://a.test/no-date</loc><lastmod>soon</lastmod></url>
  <url><changefreq>never</changefreq></url>
</urlset>`;

const URLSET_ITEMS: SitemapItem[] = [
  { kind: 'url', url: 'http://a.test/x?a=1&b=2', lastmod: '2024-05-01T00:00:00.000Z' },
  { kind: 'url', url: 'http://a.test/ü?q=<1>', lastmod: '2024-05-01T08:30:00.000Z' },
  { kind: 'url', url: 'http://a.test/no-date' },
];

describe('readSitemap: a sitemap streamed, never held whole', () => {
  test("a urlset: each <url>'s <loc> (entities and CDATA decoded, trimmed) with its lastmod when valid; other elements, and a <url> without <loc>, are passed over", async () => {
    expect(await items([URLSET])).toEqual(URLSET_ITEMS);
  });

  test.each([1, 3, 7, 64])('the same items whatever the body is cut into (pieces of %i bytes)', async (size) => {
    expect(await items(pieces(URLSET, size))).toEqual(URLSET_ITEMS);
    expect(await items(pieces(gzipSync(URLSET), size))).toEqual(URLSET_ITEMS);
  });

  test("a sitemap index lists sitemaps (as written: the walk resolves them); an index's lastmod is not a page's", async () => {
    const index = '<sitemapindex><sitemap><loc>/a.xml</loc><lastmod>2024-01-01</lastmod></sitemap><sitemap><loc>http://b.test/b.xml.gz</loc></sitemap></sitemapindex>';
    expect(await items([index])).toEqual([
      { kind: 'sitemap', url: '/a.xml' },
      { kind: 'sitemap', url: 'http://b.test/b.xml.gz' },
    ]);
  });

  test('a robots.txt (by its path) lists the sitemaps of its Sitemap: lines, in any case; nothing else of it counts', async () => {
    const robots = 'User-agent: *\r\nDisallow: /private\r\nsitemap: http://a.test/one.xml\r\n  SITEMAP:http://a.test/two.xml # comment\r\nAllow: /\r\n';
    expect(await items(pieces(robots, 5), 'http://a.test/robots.txt')).toEqual([
      { kind: 'sitemap', url: 'http://a.test/one.xml' },
      { kind: 'sitemap', url: 'http://a.test/two.xml' },
    ]);
    expect(await items([''], 'http://a.test/robots.txt')).toEqual([]);
  });

  test('a text sitemap: one URL per line (UTF-8, a byte-order mark, CRLF and blank lines allowed), gzipped or not; a later line that is not a URL is passed over', async () => {
    const text = '\uFEFF\r\nhttp://a.test/1\r\nhttps://a.test/2\r\n\r\nnot a url\r\nhttp://a.test/3';
    const expected = ['http://a.test/1', 'https://a.test/2', 'http://a.test/3'].map((url) => ({ kind: 'url', url }));
    expect(await items(pieces(text, 4), 'http://a.test/sitemap.txt')).toEqual(expected);
    expect(await items(pieces(gzipSync(text), 1), 'http://a.test/sitemap.txt.gz')).toEqual(expected);
  });

  test.each([
    ['an HTML page', '<!DOCTYPE html><html><body>Not found</body></html>', 'its root element is <html>'],
    ['a JSON document', '{"urls": []}', 'its first line is not an http(s) URL'],
    ['an empty body', '  \n ', 'is empty'],
    ['an XML document without a root element', '<?xml version="1.0"?>', 'it has no root element'],
  ])('%s is an ERR_SITEMAP naming the file', async (_what, body, problem) => {
    const err = await items([body]).catch((e: Error) => e);
    expect(err).toMatchObject({ code: 'ERR_SITEMAP', message: expect.stringContaining(problem) });
    expect((err as Error).message).toMatch(/^http:\/\/a\.test\/sitemap\.xml: /);
  });

  test('more than maxBytes once gunzipped, or a broken gzip stream, is an ERR_SITEMAP', async () => {
    const big = `<urlset>${'<url><loc>http://a.test/x</loc></url>'.repeat(2000)}</urlset>`;
    await expect(items([gzipSync(big)], undefined, 10_000)).rejects.toMatchObject({ code: 'ERR_SITEMAP', message: expect.stringContaining('larger than 10000 bytes uncompressed') });
    await expect(items([big], undefined, 10_000)).rejects.toMatchObject({ code: 'ERR_SITEMAP' });
    await expect(items([gzipSync(URLSET).subarray(0, 60)])).rejects.toMatchObject({ code: 'ERR_SITEMAP', message: expect.stringContaining('cannot be read') });
  });

  test('items come out as the body arrives: the first URL is read before the rest of the file exists', async () => {
    let release!: () => void;
    const rest = new Promise<void>((r) => (release = r));
    let restSent = false;
    async function* body() {
      yield Buffer.from('<urlset><url><loc>http://a.test/first</loc></url>');
      await rest;
      restSent = true;
      yield Buffer.from('<url><loc>http://a.test/second</loc></url></urlset>');
    }
    const it = readSitemap(body(), 'http://a.test/sitemap.xml');
    expect((await it.next()).value).toEqual({ kind: 'url', url: 'http://a.test/first' });
    expect(restSent).toBe(false);
    release();
    expect((await it.next()).value).toEqual({ kind: 'url', url: 'http://a.test/second' });
    expect((await it.next()).done).toBe(true);
  });
});

describe('sitemapLastmod: W3C Datetime to an ISO 8601 instant, to the second', () => {
  test.each([
    ['2024', '2024-01-01T00:00:00.000Z'],
    ['2024-05', '2024-05-01T00:00:00.000Z'],
    ['2024-05-01', '2024-05-01T00:00:00.000Z'],
    ['2024-05-01T10:30+02:00', '2024-05-01T08:30:00.000Z'],
    ['2024-05-01T10:30:15.789-05:00', '2024-05-01T15:30:15.000Z'],
    ['2024-05-01T10:30:15Z', '2024-05-01T10:30:15.000Z'],
    ['2024-05-01T10:30:15', '2024-05-01T10:30:15.000Z'],
    ['2024-05-01 10:30:15 +0200', '2024-05-01T08:30:15.000Z'],
    [' 2024-05-01T10:30:15z ', '2024-05-01T10:30:15.000Z'],
  ])('%j -> %s', (text, iso) => {
    expect(sitemapLastmod(text)).toBe(iso);
  });
  test.each(['', 'yesterday', '2024-13-01', '2024-05-32', '05/01/2024', '1714550400', '2024-05-01T25:00:00Z'])('%j is not a date', (text) => {
    expect(sitemapLastmod(text)).toBeUndefined();
  });
});

describe("a request's lastmod in the frontier", () => {
  test('is kept as epoch seconds (l) and read back as ISO 8601; a request without one is unchanged', () => {
    const request = { url: 'http://a.test/x', depth: 0, lastmod: '2024-05-01T08:30:00.000Z' };
    expect(encodeRequest(request)).toBe('0 http://a.test/x\n{"l":1714552200}');
    expect(decodeRequest(encodeRequest(request))).toEqual(request);
    expect(encodeRequest({ url: 'http://a.test/x', depth: 0 })).toBe('0 http://a.test/x');
    expect(decodeRequest('0 http://a.test/x\n{"l":"soon"}')).toEqual({ url: 'http://a.test/x', depth: 0 });
  });
});

describe('sitemapEntries: the walk, bounded (issue #19)', () => {
  type Served = { type?: string; body: string | Buffer; status?: number };
  let routes: Record<string, Served> = {};
  let site: Awaited<ReturnType<typeof startServer>>;
  beforeAll(async () => {
    site = await startServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      // A chain without end: each robots.txt?n=k lists robots.txt?n=k+1 and a sitemap of one page.
      if (url.pathname === '/robots.txt') {
        const n = Number(url.searchParams.get('n'));
        res.writeHead(200, { 'content-type': 'text/plain' }).end(`Sitemap: /robots.txt?n=${n + 1}\nSitemap: /one.txt?n=${n}\n`);
        return;
      }
      if (url.pathname === '/one.txt') {
        res.writeHead(200, { 'content-type': 'text/plain' }).end(`${site.url}/page-${url.searchParams.get('n')}.html\n`);
        return;
      }
      const route = routes[req.url ?? ''];
      res.writeHead(route?.status ?? (route ? 200 : 404), { 'content-type': route?.type ?? 'application/xml' }).end(route?.body ?? 'not found');
    });
  });
  afterAll(() => site.close());
  beforeEach(() => {
    routes = {};
    site.requests.length = 0;
  });

  const settings = (limits: Record<string, number> = {}) => validateSpider({ name: 'walk', allowPrivateAddresses: true, limits });
  async function walk(sources: string[], limits: Record<string, number> = {}) {
    const stats = newSitemapWalkStats();
    const entries: { url: string; lastmod?: string }[] = [];
    for await (const e of sitemapEntries(
      sources.map((s) => `${site.url}${s}`),
      { spider: settings(limits), userAgent: 'test', stats },
    ))
      entries.push(e);
    return { entries: entries.map((e) => ({ ...e, url: e.url.replace(site.url, '') })), stats, fetched: site.requests.map((r) => r.path) };
  }
  const urlset = (paths: string[]) => `<urlset>${paths.map((p) => `<url><loc>${site.url}${p}</loc></url>`).join('')}</urlset>`;

  test('depth: a robots.txt listing a sitemap is a level too, so the default 5 reads robots.txt?n=0..5 and the one-page sitemaps they list up to depth 5', async () => {
    const { entries, stats, fetched } = await walk(['/robots.txt?n=0']);
    // depth d: robots.txt?n=d (d <= 5) and one.txt?n=d-1; robots.txt?n=6 and one.txt?n=5 are at depth 6
    // depth first, in document order: the chain down to its bound, then the one-page sitemaps on the way back
    expect(fetched).toEqual([...[0, 1, 2, 3, 4, 5].map((n) => `/robots.txt?n=${n}`), ...[4, 3, 2, 1, 0].map((n) => `/one.txt?n=${n}`)]);
    expect(entries.map((e) => e.url)).toEqual([4, 3, 2, 1, 0].map((n) => `/page-${n}.html`));
    expect(stats).toEqual({ files: 11, urls: 5, skipped: { maxSitemapDepth: 2, maxSitemapFiles: 0, maxSitemapUrls: 0 } });
    expect(sitemapSkipped(stats)).toBe(2);
  });

  test('maxSitemapDepth 0 reads the sources only', async () => {
    const { fetched, stats } = await walk(['/robots.txt?n=0'], { maxSitemapDepth: 0 });
    expect(fetched).toEqual(['/robots.txt?n=0']);
    expect(stats.skipped).toEqual({ maxSitemapDepth: 2, maxSitemapFiles: 0, maxSitemapUrls: 0 });
  });

  test('files: a file is planned when it is listed, so sitemaps listed first are read first, and each one listed past the bound counts once', async () => {
    const { fetched, entries, stats } = await walk(['/robots.txt?n=0'], { maxSitemapDepth: 100, maxSitemapFiles: 7 });
    expect(fetched).toEqual(['/robots.txt?n=0', '/robots.txt?n=1', '/robots.txt?n=2', '/robots.txt?n=3', '/one.txt?n=2', '/one.txt?n=1', '/one.txt?n=0']);
    expect(entries.map((e) => e.url)).toEqual(['/page-2.html', '/page-1.html', '/page-0.html']);
    expect(stats).toEqual({ files: 7, urls: 3, skipped: { maxSitemapDepth: 0, maxSitemapFiles: 2, maxSitemapUrls: 0 } });
  });

  test('URLs: the rest of the file being read counts skipped URL by URL, each sitemap left unread counts one', async () => {
    routes['/index.xml'] = { body: '<sitemapindex><sitemap><loc>/a.xml</loc></sitemap><sitemap><loc>/b.xml</loc></sitemap><sitemap><loc>/c.xml</loc></sitemap></sitemapindex>' };
    routes['/a.xml'] = { body: urlset(['/a1', '/a2', '/a3']) };
    routes['/b.xml'] = { body: urlset(['/b1', '/b2', '/b3', '/b4']) };
    routes['/c.xml'] = { body: urlset(['/c1']) };
    const { fetched, entries, stats } = await walk(['/index.xml'], { maxSitemapUrls: 5 });
    expect(fetched).toEqual(['/index.xml', '/a.xml', '/b.xml']);
    expect(entries.map((e) => e.url)).toEqual(['/a1', '/a2', '/a3', '/b1', '/b2']);
    expect(stats).toEqual({ files: 3, urls: 5, skipped: { maxSitemapDepth: 0, maxSitemapFiles: 0, maxSitemapUrls: 3 } });
  });

  test('each sitemap is read once (an index listing itself, or one listed twice); relative children resolve against the file, others than http(s) are passed over', async () => {
    routes['/dir/index.xml'] = {
      body: '<sitemapindex><sitemap><loc>index.xml</loc></sitemap><sitemap><loc>a.xml</loc></sitemap><sitemap><loc>/dir/a.xml</loc></sitemap><sitemap><loc>file:///etc/passwd</loc></sitemap><sitemap><loc>http://[bad</loc></sitemap></sitemapindex>',
    };
    routes['/dir/a.xml'] = { body: urlset(['/a1']) };
    const { fetched, entries, stats } = await walk(['/dir/index.xml', '/dir/a.xml']);
    expect(fetched).toEqual(['/dir/index.xml', '/dir/a.xml']);
    expect(entries).toEqual([{ url: '/a1' }]);
    expect(sitemapSkipped(stats)).toBe(0);
  });

  test('a full-size gzipped sitemap (50,000 URLs with lastmod) is read whole, in order', async () => {
    const body = `<urlset>${Array.from({ length: 50_000 }, (_, i) => `<url><loc>${site.url}/p/${i}</loc><lastmod>2024-05-01T00:00:${String(i % 60).padStart(2, '0')}Z</lastmod></url>`).join('\n')}</urlset>`;
    routes['/big.xml.gz'] = { type: 'application/gzip', body: gzipSync(body) };
    const { entries, stats } = await walk(['/big.xml.gz']);
    expect(stats).toMatchObject({ files: 1, urls: 50_000 });
    expect(entries[0]).toEqual({ url: '/p/0', lastmod: '2024-05-01T00:00:00.000Z' });
    expect(entries[49_999]).toEqual({ url: '/p/49999', lastmod: '2024-05-01T00:00:19.000Z' });
  });

  test('a sitemap that cannot be fetched is an ERR_SITEMAP naming it', async () => {
    await expect(walk(['/missing.xml'])).rejects.toMatchObject({ code: 'ERR_SITEMAP', message: `${site.url}/missing.xml: HTTP 404` });
  });
});
