/**
 * The books spider of examples/books.json written as code: the same declarative follow rules and
 * listing items, while the book items come from a parse hook that also computes a field, the
 * price including 20% tax. Run it like any spider: `crawlfleet crawl examples/books.ts`.
 */
import { defineSpider, z } from '@crawlfleet/sdk';

/** Pure: a price plus 20% tax, rounded to cents. */
export function withTax(price: number): number {
  return Math.round(price * 120) / 100;
}

export default defineSpider({
  name: 'books',
  startUrls: ['http://127.0.0.1:8080/index.html'],
  allowedDomains: ['127.0.0.1:8080'],
  obeyRobotsTxt: false,
  allowPrivateAddresses: true,
  follow: [{ css: 'li.next a' }, { css: 'article.product_pod h3 a' }],
  items: [
    {
      type: 'listing',
      match: '^https?://[^/]+/(index\\.html)?$|/catalogue/page-\\d+\\.html$',
      each: 'article.product_pod',
      key: 'link',
      fields: {
        link: { css: 'h3 a', attr: 'href', absolute: true, required: true },
        title: { css: 'h3 a', attr: 'title', required: true },
        price: { css: '.price_color', regex: '([0-9.]+)', type: 'number' },
        rating: { css: 'p.star-rating', attr: 'class', regex: 'star-rating (\\w+)' },
      },
    },
  ],
  // Books come from the parse hook below, so their key is declared here.
  itemKeys: { book: 'upc' },
  // Every book must have these, with these types; a book that does not is counted invalid.
  schemas: {
    book: z.looseObject({ title: z.string().min(1), price: z.number().positive(), priceInclTax: z.number(), upc: z.string().regex(/^[0-9a-f]{16}$/) }),
  },
  *parse(page) {
    if (!/\/catalogue\/[^/]+_\d+\/index\.html$/.test(page.url)) return;
    const { $ } = page;
    const price = Number(/([0-9.]+)/.exec($('.product_main .price_color').text())?.[1]);
    const availability = $('.product_main .availability').text().trim();
    const inStock = /\((\d+) available\)/.exec(availability)?.[1];
    yield {
      type: 'book',
      title: $('.product_main h1').text().trim(),
      price,
      priceInclTax: withTax(price),
      upc: $('table.table tr:first-child td').text().trim(),
      availability,
      inStock: inStock === undefined ? null : Number(inStock),
      rating: /star-rating (\w+)/.exec($('.product_main p.star-rating').attr('class') ?? '')?.[1] ?? null,
    };
  },
});
