// Issue #19 (3): a rule that makes several items per page must name a key that tells them apart.
import { ConfigError, assertItemIdentity, itemIdentityProblems, suggestKeyField, validateSpider } from '@crawlfleet/core';

const spider = (...items: unknown[]) => validateSpider({ name: 's', items });
const link = { css: 'a', attr: 'href', absolute: true };

describe('item identity', () => {
  test('each or eachJson without key, or with key "url", is a problem at the rule; a key field or one item per page is not', () => {
    const s = spider(
      { type: 'page', fields: { title: { css: 'h1' } } },
      { type: 'page2', key: 'title', fields: { title: { css: 'h1' } } },
      { type: 'row', each: 'tr', key: 'link', fields: { link } },
      { type: 'row2', each: 'tr', fields: { link } },
      { type: 'row3', each: 'tr', key: 'url', fields: { link } },
      { type: 'api', eachJson: 'items', fields: { id: { json: 'id' } } },
    );
    expect(itemIdentityProblems(s).map((p) => p.path)).toEqual([
      ['items', 3],
      ['items', 4, 'key'],
      ['items', 5],
    ]);
    expect(itemIdentityProblems(s)[0]!.message).toBe(
      `"each" makes one item per element, but without "key" every item of a page is identified by the page's URL, so the sinks would keep one of them; name a field that tells them apart: "key": "link"`,
    );
    expect(itemIdentityProblems(s)[1]!.message).toMatch(/^"each" makes one item per element, but "url" is the page's URL, the same for every item of a page, /);
    expect(itemIdentityProblems(s)[2]!.message).toMatch(/^"eachJson" makes one item per element, .*: "key": "id"$/);
  });

  test.each([
    ['an id-like name first', { title: { css: 'b', required: true }, target: link, sku: { css: 'i' } }, 'sku'],
    ['a name ending in Id or _url', { title: { css: 'b' }, productId: { css: 'i' } }, 'productId'],
    ['then a link', { title: { css: 'b' }, target: { css: 'a', attr: 'href' } }, 'target'],
    ['not a text merely required', { price: { css: 'p', type: 'number', required: true }, title: { css: 'b', required: true } }, undefined],
    ['never an array or a flag', { id: { css: 'i', all: true }, link: { css: 'a', attr: 'href', type: 'boolean' } }, undefined],
    ['nothing that looks unique', { price: { css: 'p', type: 'number' }, title: { css: 'b' } }, undefined],
  ] as const)('the key suggested: %s', (_what, fields, expected) => {
    expect(suggestKeyField({ fields })).toBe(expected);
  });

  test('with no field to suggest, the message says how to add one, css or json', () => {
    const css = itemIdentityProblems(spider({ type: 'r', each: 'tr', fields: { title: { css: 'b' } } }))[0]!.message;
    expect(css).toMatch(/; add a field that tells them apart and name it in "key" \(for example "link": \{ "css": "a", "attr": "href", "absolute": true \} and "key": "link"\)$/);
    const json = itemIdentityProblems(spider({ type: 'r', eachJson: 'rows', fields: { title: { json: 'title' } } }))[0]!.message;
    expect(json).toMatch(/\(for example "id": \{ "json": "id" \} and "key": "id"\)$/);
  });

  test('assertItemIdentity: a ConfigError (exit 2) naming the file and the path of each rule', () => {
    const s = spider({ type: 'a', each: 'tr', fields: { link } }, { type: 'b', each: 'li', key: 'url', fields: { link } });
    let err: unknown;
    try {
      assertItemIdentity(s, 'shop.json');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues.map((i) => i.split(': ').slice(0, 2).join(': '))).toEqual(['shop.json: items[0]', 'shop.json: items[1].key']);
    expect((err as ConfigError).message).toMatch(/^invalid spider:\n {2}shop\.json: items\[0\]: "each" makes/);
    expect(() => assertItemIdentity(spider({ type: 'a', each: 'tr', key: 'link', fields: { link } }), 'shop.json')).not.toThrow();
  });
});
