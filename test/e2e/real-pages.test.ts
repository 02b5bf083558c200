import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { startServer } from '../fixtures/http-server.mjs';
import { TOP_SITES_ARCHIVE, unpack } from '../fixtures/static-site.mjs';
import { ROOT, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

/** Debian's Python, where python3-w3lib and python3-parsel live. */
const PYTHON = '/usr/bin/python3';
const REFERENCE = join(ROOT, 'test', 'fixtures', 'reference');

interface Served {
  file: string;
  contentType: string;
  /** the page whose UTF-8 original holds the same title (for the re-encoded copies) */
  sameTitleAs?: string;
}

/**
 * Copies of real pages in the charsets they declare (the archive holds them as UTF-8 bytes), plus a
 * Shift_JIS page, a UTF-16 page with a byte-order mark, and a page whose header names another charset
 * than its meta, where the header wins. Made with Python's codecs.
 */
function encodedCopies(pages: string, dir: string): Record<string, Served> {
  const copies = [
    { name: 'gb2312-13', src: '13', codec: 'gb2312', contentType: 'text/html' },
    { name: 'gb2312-93', src: '93', codec: 'gb2312', contentType: 'text/html' },
    { name: 'gbk-114', src: '114', codec: 'gbk', contentType: 'text/html' },
    { name: 'windows-1251-122', src: '122', codec: 'cp1251', contentType: 'text/html' },
    { name: 'windows-1251-125', src: '125', codec: 'cp1251', contentType: 'text/html' },
    { name: 'iso-8859-1-59', src: '59', codec: 'latin-1', contentType: 'text/html' },
    { name: 'iso-8859-1-87', src: '87', codec: 'latin-1', contentType: 'text/html' },
    // bilibili's title mixes kana, kanji and characters Shift_JIS lacks (character references then).
    { name: 'shift_jis-27', src: '27', codec: 'shift_jis', declare: 'Shift_JIS', contentType: 'text/html' },
    { name: 'utf-16le-bom-92', src: '92', codec: 'utf-16-le', bom: true, contentType: 'text/html' },
    // Avito in windows-1251 says UTF-8 in its meta; the header's windows-1251 wins.
    { name: 'header-wins-28', src: '28', codec: 'cp1251', contentType: 'text/html; charset=windows-1251' },
  ];
  const jobs = copies.map((c) => ({ src: join(pages, `${c.src}.html`), dest: join(dir, `${c.name}.html`), codec: c.codec, bom: c.bom ?? false, declare: c.declare ?? null }));
  execFileSync(PYTHON, [join(REFERENCE, 'encode_pages.py')], { input: JSON.stringify(jobs) });
  return Object.fromEntries(copies.map((c) => [`/copy/${c.name}.html`, { file: join(dir, `${c.name}.html`), contentType: c.contentType, sameTitleAs: `/top/${c.src}.html` }]));
}

/** Titles as Scrapy reads them (w3lib decodes, parsel on lxml selects), by the key given. */
function referenceTitles(pages: Record<string, Served>): Map<string, string | null> {
  const manifest = Object.values(pages).map((s) => ({ file: s.file, contentType: s.contentType }));
  const out = execFileSync(PYTHON, [join(REFERENCE, 'page_titles.py')], { input: JSON.stringify(manifest), maxBuffer: 64 * 1024 * 1024 });
  const byFile = JSON.parse(out.toString('utf8')) as Record<string, { title: string | null }>;
  return new Map(Object.entries(pages).map(([key, s]) => [key, byFile[s.file]!.title]));
}

const collapse = (s: unknown) => (typeof s === 'string' ? s.replace(/\s+/g, ' ').trim() : '');

describe('real pages nobody here wrote: 130 home pages of popular sites, and copies of them in their own charsets', () => {
  const prefix = uniquePrefix('real');
  const dir = tempDir('real');
  const pages = unpack(TOP_SITES_ARCHIVE);
  const served: Record<string, Served> = {};
  for (const name of readdirSync(pages).filter((f) => f.endsWith('.html'))) served[`/top/${name}`] = { file: join(pages, name), contentType: 'text/html' };
  Object.assign(served, encodedCopies(pages, dir));
  let site: Awaited<ReturnType<typeof startServer>>;

  beforeAll(async () => {
    // A bare `text/html`, as many servers send, except where a page is about the header.
    site = await startServer((req, res) => {
      const page = served[new URL(req.url ?? '/', 'http://x').pathname];
      if (!page) return void res.writeHead(404, { 'content-type': 'text/html' }).end('<html><body>404</body></html>');
      const body = readFileSync(page.file);
      res.writeHead(200, { 'content-type': page.contentType, 'content-length': body.length }).end(body);
    });
  });
  afterAll(async () => {
    await site.close();
    await dropPrefix(prefix);
  });

  test('every page is parsed, none is taken for a block, and every title is the one Scrapy reads (w3lib + parsel)', async () => {
    const paths = Object.keys(served).sort();
    expect(paths.length).toBe(140);
    const spider = writeJson(dir, 'titles.json', {
      name: 'titles',
      startUrls: paths.map((p) => `${site.url}${p}`),
      allowPrivateAddresses: true,
      obeyRobotsTxt: false,
      items: [{ type: 'page', fields: { title: { css: 'title' } } }],
    });
    const out = join(dir, 'titles.jsonl');
    const run = await runCli(['crawl', spider, '--crawl-id', 'real-titles', '--out', out, '--json', '--quiet', '--concurrency', '16'], { env: testEnv(prefix) });
    expect(run.code).toBe(0);
    const status = JSON.parse(run.stdout.trim().split('\n').pop()!);
    expect(status.state).toBe('done');
    expect(status.counters).toMatchObject({ seen: 140, fetched: 140, parsed: 140, items: 140, written: 140, blocked: 0, failed: 0, retries: 0 });

    const reference = referenceTitles(served);
    const titles = new Map(readJsonl(out).map((i) => [new URL(i.url as string).pathname, collapse(i.title)]));
    const mismatches = paths.filter((p) => titles.get(p) !== collapse(reference.get(p))).map((p) => ({ page: p, ours: titles.get(p), reference: reference.get(p) }));
    expect(mismatches).toEqual([]);

    // The copies read exactly as their sources read in UTF-8, the bytes they were saved in: the
    // declared charset was honoured. (Served as they are, the sources that declare another charset
    // give the mojibake a browser shows, and the reference agrees.)
    const copies = Object.entries(served).filter(([, s]) => s.sameTitleAs);
    const sourcesInUtf8 = referenceTitles(Object.fromEntries(copies.map(([path, s]) => [path, { file: served[s.sameTitleAs!]!.file, contentType: 'text/html; charset=utf-8' }])));
    for (const [path] of copies) expect({ path, title: titles.get(path) }).toEqual({ path, title: collapse(sourcesInUtf8.get(path)) });
    expect(titles.get('/copy/gbk-114.html')).toBe('未来网');
    expect(titles.get('/copy/windows-1251-125.html')).toBe('КиноПоиск — Все фильмы планеты');
    expect(titles.get('/copy/shift_jis-27.html')).toBe('哔哩哔哩 (゜-゜)つロ 干杯~-bilibili');
    expect(titles.get('/copy/header-wins-28.html')).toBe('Доска объявлений от частных лиц и компаний на Avito');
    // Items leave as UTF-8, whatever the page's charset.
    expect(readFileSync(out, 'utf8')).toContain('"title":"未来网"');
  });
});
