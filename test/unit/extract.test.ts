import { validateSpider } from '@crawlfleet/core';
import { applyRegex, convertValue, extractPage } from '@crawlfleet/extract';

const meta = { crawlId: 'c1', fetchedAt: '2026-12-02T10:00:00.000Z' };

const spider = validateSpider({
  name: 'shop',
  startUrls: ['http://shop.test/'],
  follow: [{ css: 'a.next' }, { css: 'a', allow: ['\\.html$'], deny: ['/_sources/'] }],
  items: [
    {
      type: 'product',
      match: '/list\\.html$',
      each: 'div.p',
      key: 'link',
      fields: {
        link: { css: 'a', attr: 'href', absolute: true, required: true },
        name: { css: 'a' },
        price: { css: '.price', regex: '([0-9.,]+)', type: 'number' },
        qty: { css: '.qty', type: 'integer' },
        sale: { css: '.sale', type: 'boolean' },
        tags: { css: '.tag', all: true },
      },
    },
    { type: 'page', fields: { title: { css: 'title' } } },
  ],
});

const html = `<html><head><title> Shop </title><base href="/base/"></head><body>
  <div class="p"><a href="one.html"> One </a><span class="price">£1,234.50</span><span class="qty">3</span><span class="sale">yes</span><i class="tag">a</i><i class="tag">b</i></div>
  <div class="p"><a href="/two.html#x">Two</a><span class="price">free</span></div>
  <div class="p"><span class="price">9</span></div>
  <a class="next" href="list.html?page=2">next</a>
  <a href="/_sources/x.html">src</a><a href="mailto:a@b.c">mail</a><a href="https://other.test/z.html">z</a>
</body></html>`;

describe('extractPage', () => {
  const page = extractPage(html, 'http://shop.test/cat/list.html', spider, meta);

  test('one item per `each` element, fields scoped to it, typed and resolved against <base href>', () => {
    expect(page.items.filter((i) => i.type === 'product')).toEqual([
      {
        type: 'product',
        url: 'http://shop.test/cat/list.html',
        link: 'http://shop.test/base/one.html',
        name: 'One',
        price: 1234.5,
        qty: 3,
        sale: true,
        tags: ['a', 'b'],
        spider: 'shop',
        crawlId: 'c1',
        fetchedAt: meta.fetchedAt,
      },
      {
        type: 'product',
        url: 'http://shop.test/cat/list.html',
        link: 'http://shop.test/two.html',
        name: 'Two',
        price: null,
        qty: null,
        sale: null,
        tags: [],
        spider: 'shop',
        crawlId: 'c1',
        fetchedAt: meta.fetchedAt,
      },
    ]);
  });

  test('an item missing a required field is dropped and counted invalid', () => {
    expect(page.invalid).toBe(1);
  });

  test('a rule without `each` makes one item per page; without `match`, it applies to every page', () => {
    expect(page.items.filter((i) => i.type === 'page')).toEqual([{ type: 'page', url: 'http://shop.test/cat/list.html', title: 'Shop', spider: 'shop', crawlId: 'c1', fetchedAt: meta.fetchedAt }]);
    const other = extractPage('<title>x</title>', 'http://shop.test/other', spider, meta);
    expect(other.items.map((i) => i.type)).toEqual(['page']);
  });

  test('links follow the rules: canonical, unique, allow and deny applied, non-http dropped', () => {
    expect(page.links).toEqual(['http://shop.test/base/list.html?page=2', 'http://shop.test/base/one.html', 'http://shop.test/two.html', 'https://other.test/z.html']);
  });

  test('hostile HTML does not throw', () => {
    const nasty = `<div class="p"><a href="http://[::1">x</a><span class="price">1</span>${'<div>'.repeat(5000)}\u0000<<<>>>`;
    expect(() => extractPage(nasty, 'http://shop.test/list.html', spider, meta)).not.toThrow();
  });
});

describe('field conversion', () => {
  test.each([
    ['12.5', 'number', 12.5],
    ['1,234', 'number', 1234],
    ['abc', 'number', null],
    ['', 'number', null],
    ['7.9', 'integer', 7],
    ['false', 'boolean', false],
    ['In stock', 'boolean', true],
    [' x ', 'string', 'x'],
  ] as const)('%j as %s -> %j', (raw, type, expected) => {
    expect(convertValue(raw, type)).toBe(expected);
  });

  test('regex takes the first capture group, or the whole match', () => {
    expect(applyRegex('£51.77', /([0-9.]+)/)).toBe('51.77');
    expect(applyRegex('abc123', /\d+/)).toBe('123');
    expect(applyRegex('abc', /\d+/)).toBeUndefined();
  });
});
