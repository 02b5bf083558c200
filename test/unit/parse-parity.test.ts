import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { validateSpider, type Spider } from '@crawlfleet/core';
import { extractParsed, parseHtml } from '@crawlfleet/extract';
import { decodeHtml } from '@crawlfleet/fetch';
import { BOOKS_ARCHIVE, TOP_SITES_ARCHIVE, unpack } from '../fixtures/static-site.mjs';
import { ROOT } from '../helpers/cli.js';

const meta = { crawlId: 'c', fetchedAt: '2026-01-01T00:00:00.000Z' };

function htmlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? htmlFiles(path) : name.endsWith('.html') ? [path] : [];
  });
}

/** The spiders whose rules run on every page: the example, the e2e tests' own, and rules that see the whole tree. */
const spiders: Spider[] = [
  validateSpider({ ...JSON.parse(readFileSync(join(ROOT, 'examples', 'books.json'), 'utf8')), startUrls: [] }),
  validateSpider({ name: 'e2e', follow: [{ css: 'a' }], items: [{ type: 'page', fields: { title: { css: 'title', required: true }, heading: { css: 'h1.t' } } }] }),
  validateSpider({
    name: 'generic',
    follow: [{ css: 'a[href]' }],
    items: [
      {
        type: 'page',
        fields: {
          title: { css: 'title' },
          h1: { css: 'h1', all: true },
          description: { css: 'meta[name=description]', attr: 'content' },
          cells: { css: 'table tr td', all: true },
          rows: { css: 'table > tbody > tr', all: true },
          hrefs: { css: 'a[href]', attr: 'href', all: true },
          linkTexts: { css: 'a[href]', all: true },
          paragraphs: { css: 'p', all: true },
          listItems: { css: 'li', all: true },
          body: { css: 'body' },
        },
      },
      { type: 'row', each: 'table > tbody > tr', fields: { first: { css: 'td', required: true } } },
    ],
  }),
];

describe('htmlparser2 builds the tree parse5 builds, or parse5 parses the page', () => {
  const books = unpack(BOOKS_ARCHIVE);
  const top = unpack(TOP_SITES_ARCHIVE);
  const blocks = join(ROOT, 'test', 'fixtures', 'blocks');
  const pages = Object.entries({ books, top, blocks }).flatMap(([source, dir]) =>
    htmlFiles(dir).map((file) => ({ source, file, url: `http://127.0.0.1:8080/${relative(dir, file)}`, html: decodeHtml(readFileSync(file), 'text/html') })),
  );

  const fast: typeof pages = [];

  test('every real page gives the same items, links and invalid counts under both paths', () => {
    expect(pages).toHaveLength(400);
    const differing = pages.filter((page) => {
      const slow = parseHtml(page.html, 'parse5');
      const auto = parseHtml(page.html);
      if (auto.parser === 'parse5') return false;
      fast.push(page);
      return spiders.some((spider) => !isDeepStrictEqual(extractParsed(slow.$, page.url, spider, meta), extractParsed(auto.$, page.url, spider, meta)));
    });
    expect(differing.map((p) => p.file)).toEqual([]);
  });

  test('htmlparser2 takes 371 of the 400 pages: every book page, 102 of the 130 top sites', () => {
    const count = (source: string) => [pages.filter((p) => p.source === source).length, fast.filter((p) => p.source === source).length];
    expect({ books: count('books'), top: count('top'), blocks: count('blocks') }).toEqual({ books: [249, 249], top: [130, 102], blocks: [21, 20] });
  });
});

describe('the fix-ups and the rules that send a page to parse5', () => {
  const page = (body: string, head = '') => `<!DOCTYPE html><html><head>${head}</head><body>${body}</body></html>`;
  const same = (html: string, css: string) => {
    const fast = parseHtml(html);
    const slow = parseHtml(html, 'parse5');
    const texts = (p: typeof fast) =>
      p
        .$(css)
        .toArray()
        .map((el) => [p.$(el).text(), p.$(el).attr('href') ?? null]);
    expect(texts(fast)).toEqual(texts(slow));
    return fast;
  };

  test('an implied tbody, as parse5 inserts it, up to the next table section', () => {
    const html = page('<table><tr><td>1</td></tr> <tr><td>2</td></tr><tfoot><tr><td>f</td></tr></tfoot></table>');
    expect(same(html, 'table > tbody > tr').parser).toBe('htmlparser2');
    expect(parseHtml(html).$('table > tbody > tr').length).toBe(2);
  });

  test('noscript and iframe content is the source as written; CR LF is LF; a newline after <pre> is dropped', () => {
    const html = page('<noscript><a href="/n">x &amp; y</a></noscript><p>a\r\nb</p><pre>\nkeep</pre><iframe><a href="/i">i</a></iframe>');
    const parsed = same(html, 'a, p, pre, noscript, iframe');
    expect(parsed.parser).toBe('htmlparser2');
    expect(parsed.$('a').length).toBe(0);
    expect(parsed.$('noscript').text()).toBe('<a href="/n">x &amp; y</a>');
  });

  test("template content sits in a fragment; SVG names take the standard's case and xlink:href is href", () => {
    const html = page('<template><a href="/t">t</a></template><svg viewBox="0 0 1 1"><clipPath id="c"></clipPath><a xlink:href="/s">s</a></svg>');
    const parsed = same(html, 'template a, svg a[href], clippath, [viewBox]');
    expect(parsed.parser).toBe('htmlparser2');
    expect(parsed.$('svg a[href]').attr('href')).toBe('/s');
    expect(parsed.$('template > a').length).toBe(0);
  });

  test.each([
    ['a link inside a link', page('<a href="/1">one <a href="/2">two</a></a>'), '<a> in <a> in <body>'],
    ['a block closing a formatting element', page('<div><b>bold</div>after'), '</div> closes <b>'],
    ['a div inside a p, below a span', page('<p><span><div>x</div></span></p>'), '<div> in <span> in <p>'],
    ['a cell outside a row', page('<table><td>x</td></table>'), '<td> in <table> in <body>'],
    ['text foster-parented out of a table', page('<table>loose<tr><td>x</td></tr></table>'), 'text in <table>'],
    ['an end tag without a name', page('<p>a</>b</p>'), 'text in <p>'],
    ['a heading closed by another heading', page('<h2>a</h3>b'), '</h3> with <h2> open'],
    ['no html/head/body frame', '<title>t</title><p>x</p>', 'no <html><head></head><body></body></html> frame'],
    ['body content in the head', '<html><head><div>x</div></head><body></body></html>', 'no <html><head></head><body></body></html> frame'],
  ])('%s goes to parse5', (_, html, reason) => {
    const parsed = parseHtml(html);
    expect(parsed.parser).toBe('parse5');
    expect(parsed.reason).toBe(reason);
  });
});
