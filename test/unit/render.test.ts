import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ConfigError, renderModeFor, renderSettings, validateSpider } from '@crawlfleet/core';
import { fetchQueueFor } from '@crawlfleet/crawl';
import { extractResponse } from '@crawlfleet/extract';
import { autoRoute, contentSelectors, mayBeScriptBuilt, needsRendering, pageKindOf, redirectStop, rulesFoundContent } from '@crawlfleet/render';
import { unpackRealPages } from '../helpers/real-pages.js';

const ROOT = join(import.meta.dirname, '..', '..');
const books = validateSpider(JSON.parse(readFileSync(join(ROOT, 'examples', 'books.json'), 'utf8')));

describe('render settings', () => {
  test('the string form is the mode alone, with the defaults', () => {
    expect(renderSettings(validateSpider({ name: 's', render: 'auto' }))).toEqual({
      mode: 'auto',
      rules: [],
      waitFor: { networkIdle: false, maxWaitMs: 5000 },
      timeoutMs: 30_000,
      block: ['image', 'font', 'media'],
      maxRequestsPerPage: 100,
    });
    expect(renderSettings(validateSpider({ name: 's' })).mode).toBe('never');
  });

  test('the object form: the first rule whose match matches the URL decides, else the mode', () => {
    const settings = renderSettings(
      validateSpider({
        name: 's',
        render: {
          mode: 'never',
          rules: [
            { match: '/app/admin/', mode: 'never' },
            { match: '/app/', mode: 'always' },
            { match: '\\?q=', mode: 'auto' },
          ],
          waitFor: { selector: '#app[data-ready]' },
        },
      }),
    );
    expect(renderModeFor(settings, 'http://s.test/app/admin/x')).toBe('never');
    expect(renderModeFor(settings, 'http://s.test/app/item/1')).toBe('always');
    expect(renderModeFor(settings, 'http://s.test/search?q=1')).toBe('auto');
    expect(renderModeFor(settings, 'http://s.test/about')).toBe('never');
    expect(settings.waitFor).toEqual({ selector: '#app[data-ready]', networkIdle: false, maxWaitMs: 5000 });
    // Only `always` skips the plain fetch: `auto` is judged by the fetcher.
    expect(fetchQueueFor(settings, 'http://s.test/app/item/1')).toBe('render');
    expect(fetchQueueFor(settings, 'http://s.test/search?q=1')).toBe('fetch');
    expect(fetchQueueFor(settings, 'http://s.test/about')).toBe('fetch');
  });

  test('a bad render setting is a configuration error naming its path', () => {
    const problem = (render: unknown) => {
      try {
        validateSpider({ name: 's', render }, 'shop.json');
        return '';
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message;
      }
    };
    expect(problem('sometimes')).toMatch(/shop\.json: render/);
    expect(problem({ rules: [{ match: '(', mode: 'always' }] })).toMatch(/render\.rules\[0\]\.match: invalid regular expression/);
    expect(problem({ timeoutMs: 10 })).toMatch(/render\.timeoutMs/);
    expect(problem({ waitFor: { maxWaitMs: -1 } })).toMatch(/render\.waitFor\.maxWaitMs/);
  });
});

describe('is a page built by script? (mayBeScriptBuilt)', () => {
  test.each([
    ['<html><body><h1>Hi</h1></body></html>', false],
    ['<script type="application/ld+json">{"@type":"Product"}</script>', false],
    ['<script type="application/json" id="data">{}</script><script type="text/template"><b></b></script>', false],
    ['<script src="/app.js" defer></script>', true],
    ['<script>document.write("x")</script>', true],
    ['<SCRIPT TYPE="text/javascript">x()</SCRIPT>', true],
    ["<script type='module' src='/m.js'></script>", true],
    ['<script type="text/javascript; charset=utf-8">x()</script>', true],
    ['<script type=text/x-handlebars-template></script>', false],
    ['<noscript>Enable JavaScript</noscript>', false],
  ])('%s: %s', (html, expected) => {
    expect(mayBeScriptBuilt(html)).toBe(expected);
  });
});

describe('render "auto" on real pages nobody here wrote', () => {
  test("books.toscrape.com's pages all carry scripts (jQuery, Bootstrap), yet the books spider's rules read every one of them: none goes to a browser", () => {
    const { dir, files: pages } = unpackRealPages(['books-toscrape-site.tar.gz']);
    expect(pages).toHaveLength(249);
    const rendered: string[] = [];
    for (const file of pages) {
      const html = readFileSync(file, 'utf8');
      expect(mayBeScriptBuilt(html)).toBe(true);
      const url = `http://books.test/${relative(dir, file)}`;
      const found = extractResponse({ body: html, contentType: 'text/html', url }, books, { crawlId: 'c', fetchedAt: new Date(0).toISOString() });
      if (needsRendering(books, url, html, found)) rendered.push(url);
    }
    expect(rendered).toEqual([]);
  });

  test('130 home pages of popular sites (2017), a spider that follows every link: 126 have scripts, and the 5 sent to a browser are the application shells among them', () => {
    const { files } = unpackRealPages(['top-sites-html.tar.gz']);
    const everyLink = validateSpider({ name: 'all', follow: [{ css: 'a[href]' }] });
    expect(files).toHaveLength(130);
    let withScripts = 0;
    const rendered: string[] = [];
    for (const file of files) {
      const html = readFileSync(file, 'utf8');
      if (mayBeScriptBuilt(html)) withScripts++;
      const url = `http://site.test/${file}`;
      const found = extractResponse({ body: html, contentType: 'text/html', url }, everyLink, { crawlId: 'c', fetchedAt: new Date(0).toISOString() });
      if (needsRendering(everyLink, url, html, found)) rendered.push(file.replace(/^.*\//, ''));
    }
    expect(withScripts).toBe(126);
    // Instagram's, Gfycat's ("this page requires javascript"), hotstar's (#app-main-view), Dingit.tv's
    // and one more whose anchors have no href: not one link in the HTML as served.
    expect(rendered.sort()).toEqual(['117.html', '61.html', '76.html', '86.html', '99.html']);
  });

  test('an empty application shell of the same site (its markup, no content) goes to a browser', () => {
    const shell = '<html><head><script src="/static/app.js"></script></head><body><div id="root"></div></body></html>';
    const url = 'http://books.test/catalogue/a-light-in-the-attic_1000/index.html';
    const found = extractResponse({ body: shell, contentType: 'text/html', url }, books, { crawlId: 'c', fetchedAt: new Date(0).toISOString() });
    expect(needsRendering(books, url, shell, found)).toBe(true);
    // The same shell without a script cannot be built by one: it is parsed as it is.
    const noScript = shell.replace('<script src="/static/app.js"></script>', '');
    expect(needsRendering(books, url, noScript, found)).toBe(false);
  });
});

describe('what the rules look for (rulesFoundContent, contentSelectors)', () => {
  const detail = 'http://books.test/catalogue/x_1/index.html';
  const listing = 'http://books.test/catalogue/page-2.html';
  test('where item rules apply, a valid item is content; elsewhere a followed link is', () => {
    expect(rulesFoundContent(books, detail, { items: [{ title: 't' }], links: [] })).toBe(true);
    expect(rulesFoundContent(books, detail, { items: [], links: ['http://books.test/a'] })).toBe(false);
    expect(rulesFoundContent(books, 'http://books.test/about.html', { items: [], links: ['http://books.test/a'] })).toBe(true);
    expect(rulesFoundContent(books, 'http://books.test/about.html', { items: [], links: [] })).toBe(false);
    // A spider that follows nothing and has no rule for the page looks for nothing there.
    expect(rulesFoundContent({ items: [], follow: [] }, 'http://books.test/about.html', { items: [], links: [] })).toBe(true);
  });

  test("the render wait's selectors: an item rule's each and required fields, else the follow rules'", () => {
    expect(contentSelectors(books, detail)).toEqual([['.product_main h1', 'table.table tr:first-child td']]);
    expect(contentSelectors(books, listing)).toEqual([['article.product_pod', 'h3 a', 'h3 a']]);
    expect(contentSelectors(books, 'http://books.test/about.html')).toEqual([['li.next a'], ['article.product_pod h3 a']]);
  });
});

describe('what render "auto" learns (autoRoute, pageKindOf)', () => {
  test('pages of a kind go straight to render once 5 were judged and 80% of them needed a browser, but for a 10% sample', () => {
    expect(autoRoute({ rendered: 4, plain: 0 }, 0.5)).toBe('judge');
    expect(autoRoute({ rendered: 5, plain: 0 }, 0.5)).toBe('render');
    expect(autoRoute({ rendered: 5, plain: 0 }, 0.09)).toBe('judge');
    expect(autoRoute({ rendered: 4, plain: 1 }, 0.5)).toBe('render');
    expect(autoRoute({ rendered: 3, plain: 2 }, 0.5)).toBe('judge');
    expect(autoRoute({ rendered: 79, plain: 21 }, 0.99)).toBe('judge');
  });

  test("a kind is the host and the path's directory, digits folded", () => {
    expect(pageKindOf('http://shop.test:8080/app/item/31.html')).toBe('shop.test:8080/app/item/');
    expect(pageKindOf('http://shop.test/app/item/7.html?x=1')).toBe('shop.test/app/item/');
    expect(pageKindOf('http://shop.test/p/2024/05/story')).toBe('shop.test/p/0/0/');
    expect(pageKindOf('http://shop.test/product-123')).toBe('shop.test/');
    expect(pageKindOf('http://other.test/app/item/31.html')).not.toBe(pageKindOf('http://shop.test/app/item/31.html'));
  });
});

describe("redirects in the browser under a plain request's rules (redirectStop)", () => {
  const sameOrigin = (from: URL, to: URL) => from.origin === to.origin;
  test('the first hop a plain request would not follow, or a chain past maxRedirects', () => {
    expect(redirectStop(['http://a.test/'], sameOrigin, 0)).toBeUndefined();
    expect(redirectStop(['http://a.test/', 'http://a.test/b', 'http://a.test/c'], sameOrigin, 2)).toBeUndefined();
    expect(redirectStop(['http://a.test/', 'http://a.test/b', 'http://www.a.test/'], sameOrigin, 5)).toEqual({ kind: 'redirect', hop: 1 });
    expect(redirectStop(['http://a.test/', 'http://a.test/b', 'http://a.test/c'], sameOrigin, 1)).toEqual({ kind: 'too-many' });
    // Another origin is a new URL of the crawl whatever the budget left: the fetcher counts it there.
    expect(redirectStop(['http://a.test/', 'https://a.test/'], sameOrigin, 0)).toEqual({ kind: 'redirect', hop: 0 });
  });
});
