import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { validateSpider } from '@crawlfleet/core';
import { classifyResponse, detectBlock, summarizePage } from '@crawlfleet/fetch';
import { unpackRealPages } from '../helpers/real-pages.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures');
const BLOCKS = join(FIXTURES, 'blocks');

interface BlockFixture {
  file: string;
  vendor: string;
  status: number;
  headers: Record<string, string>;
  /** what gives it away with the default settings */
  signal: string;
  /** and by the vendor's markup alone (blockPatterns: []) */
  markerSignal: string;
}

const blockPages = JSON.parse(readFileSync(join(BLOCKS, 'manifest.json'), 'utf8')) as BlockFixture[];
const contentPages = (JSON.parse(readFileSync(join(BLOCKS, 'not-blocks', 'manifest.json'), 'utf8')) as { file: string }[]).map((p) => p.file);
const spider = validateSpider({ name: 'blocks' });
const markersOnly = validateSpider({ name: 'blocks', blockPatterns: [] });
const read = (...path: string[]) => readFileSync(join(...path));

/** Every .html file of the real pages in test/fixtures/data (books.toscrape.com and 130 top sites). */
const realPages = (): string[] => unpackRealPages().files;

describe('block detection: a pure verdict per page', () => {
  test(`at least 8 vendors' block pages, modelled on the real ones (${blockPages.length} here)`, () => {
    expect(new Set(blockPages.map((b) => b.vendor)).size).toBeGreaterThanOrEqual(8);
  });

  // Served with 200 and no telling header, the markup alone must give them away.
  test.each(blockPages.map((b) => [b.file, b.signal] as const))('%s is a block (%s), even served as a 200', (file, signal) => {
    const verdict = detectBlock({ html: read(BLOCKS, file).toString('utf8') }, spider);
    expect(verdict).toMatchObject({ blocked: true, signal });
    expect(classifyResponse({ status: 200, contentType: 'text/html', body: read(BLOCKS, file) }, spider)).toMatchObject({ kind: 'blocked', signal });
  });

  test.each(blockPages.map((b) => [b.file, b.markerSignal] as const))('%s is recognised by its own markup alone (%s), without blockPatterns', (file, signal) => {
    expect(detectBlock({ html: read(BLOCKS, file).toString('utf8') }, markersOnly)).toMatchObject({ blocked: true, signal });
  });

  test.each(blockPages.map((b) => [b.file, b.status, b.headers] as const))('%s with its real status (%i) and headers is a block', (file, status, headers) => {
    expect(classifyResponse({ status, contentType: 'text/html', body: read(BLOCKS, file), headers }, spider)).toMatchObject({ kind: 'blocked' });
  });

  test('a block page is short: the threshold, blockPageMaxChars, sits well above the longest of them', () => {
    const lengths = blockPages.map((b) => summarizePage(read(BLOCKS, b.file).toString('utf8'), 1_000_000).text.length);
    expect(Math.max(...lengths) * 1.5).toBeLessThanOrEqual(spider.blockPageMaxChars);
  });

  test.each(contentPages)('not-blocks/%s is content', (file) => {
    expect(detectBlock({ html: read(BLOCKS, 'not-blocks', file).toString('utf8') }, spider)).toEqual({ blocked: false });
  });

  test('not one of the real pages of books.toscrape.com and the 130 top sites is a block', () => {
    const pages = realPages();
    expect(pages.length).toBeGreaterThanOrEqual(370);
    const blocked = pages.filter((p) => classifyResponse({ status: 200, contentType: 'text/html', body: readFileSync(p) }, spider).kind !== 'ok');
    expect(blocked).toEqual([]);
  });

  test('the two real home pages that mention a captcha in their text are content (IRCTC login box, Airbnb)', () => {
    const pages = realPages();
    for (const name of ['18.html', '119.html']) {
      const file = pages.find((p) => p.endsWith(`/${name}`))!;
      expect(classifyResponse({ status: 200, contentType: 'text/html', body: readFileSync(file) }, spider)).toEqual({ kind: 'ok' });
    }
  });

  test('blockMarkers: false leaves only the patterns; blockPatterns: [] and no markers never blocks a 200', () => {
    const datadome = blockPages.find((b) => b.signal === 'datadome')!;
    const html = read(BLOCKS, datadome.file).toString('utf8');
    expect(detectBlock({ html }, validateSpider({ name: 'x', blockMarkers: false, blockPatterns: [] }))).toEqual({ blocked: false });
    expect(detectBlock({ html: '<title>Access Denied</title>' }, validateSpider({ name: 'x', blockMarkers: false }))).toMatchObject({ blocked: true, signal: 'pattern' });
    expect(detectBlock({ html: '', headers: { 'cf-mitigated': 'challenge' } }, spider)).toMatchObject({ blocked: true, signal: 'cloudflare-challenge' });
  });

  test('a captcha widget is a challenge only on a short page with nothing to type into', () => {
    const widget = '<script src="https://www.google.com/recaptcha/api.js"></script><div class="g-recaptcha" data-sitekey="k"></div>';
    expect(detectBlock({ html: `<form action="/verify">${widget}<input type="hidden" name="r"><button>Go</button></form>` }, spider)).toMatchObject({ signal: 'captcha-form' });
    expect(detectBlock({ html: `<form action="/login"><input name="user"><input type="password" name="pw">${widget}<button>Sign in</button></form>` }, spider)).toEqual({ blocked: false });
    expect(detectBlock({ html: `<p>${'News of the day. '.repeat(200)}</p><form>${widget}</form>` }, spider)).toEqual({ blocked: false });
  });

  test('the visible text leaves out scripts, styles, comments, attributes, SVG titles and iframe fallbacks', () => {
    const summary = summarizePage(
      '<html><head><title> Page\n title </title><style>.captcha{}</style></head><body><!-- captcha --><svg><title>icon</title></svg><p data-x="captcha">Hello&nbsp;<b>world</b></p><iframe>fallback</iframe><script>captcha()</script></body></html>',
      100,
    );
    expect(summary).toEqual({ title: 'Page title', text: 'Hello world', short: true, textInputs: 0, passwordInputs: 0 });
    expect(summarizePage(`<p>${'x'.repeat(101)}</p>`, 100).short).toBe(false);
  });
});
