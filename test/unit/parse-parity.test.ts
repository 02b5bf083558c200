import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { parseHtml } from '@crawlfleet/extract';
import { ROOT } from '../helpers/cli.js';

describe('htmlparser2 builds the tree parse5 builds, or parse5 parses the page', () => {
  // test/fixtures/parse-parity.mjs parses the 400 real pages both ways and compares three spiders'
  // extractions, in a plain Node process (jest's module sandbox ran it three times slower).
  let parity: { pages: number; differing: string[]; bySource: Record<string, [number, number]> };
  beforeAll(() => {
    parity = JSON.parse(execFileSync(process.execPath, [join(ROOT, 'test', 'fixtures', 'parse-parity.mjs')], { encoding: 'utf8', maxBuffer: 1 << 24, timeout: 300_000 }));
  });

  test('every real page gives the same items, links and invalid counts under both paths', () => {
    expect(parity.pages).toBe(400);
    expect(parity.differing).toEqual([]);
  });

  test('htmlparser2 takes 371 of the 400 pages: every book page, 102 of the 130 top sites', () => {
    expect(parity.bySource).toEqual({ books: [249, 249], top: [130, 102], blocks: [21, 20] });
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
