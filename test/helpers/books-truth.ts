import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as cheerio from 'cheerio';
import { comparable } from './cli.js';

/** The ground truth, read from the HTML files here with cheerio, independently of the crawler's rules. */
export function booksTruth(root: string, base: string) {
  const listingPages = ['index.html', ...Array.from({ length: 48 }, (_, i) => `catalogue/page-${i + 2}.html`)];
  const listings = listingPages.flatMap((page) => {
    const $ = cheerio.load(readFileSync(join(root, page), 'utf8'));
    const pageUrl = `${base}/${page}`;
    return $('article.product_pod')
      .toArray()
      .map((el) => ({
        type: 'listing',
        link: new URL($(el).find('h3 a').attr('href')!, pageUrl).href,
        title: $(el).find('h3 a').attr('title'),
        price: Number(
          $(el)
            .find('.price_color')
            .text()
            .replace(/[^0-9.]/g, ''),
        ),
        rating: $(el).find('p.star-rating').attr('class')!.split(/\s+/)[1],
      }));
  });
  const details = readdirSync(join(root, 'catalogue'))
    .filter((d) => /_\d+$/.test(d))
    .map((d) => {
      const $ = cheerio.load(readFileSync(join(root, 'catalogue', d, 'index.html'), 'utf8'));
      const availability = $('.product_main .availability').text().trim();
      return {
        type: 'book',
        url: `${base}/catalogue/${d}/index.html`,
        title: $('.product_main h1').text().trim(),
        price: Number(
          $('.product_main .price_color')
            .text()
            .replace(/[^0-9.]/g, ''),
        ),
        upc: $('table.table tr').first().find('td').text().trim(),
        availability,
        rating: $('.product_main p.star-rating').attr('class')!.split(/\s+/)[1],
      };
    });
  // Detail pages recommend other books (also article.product_pod), which the follow rule takes too.
  // A few of those links are absolute, to the real books.toscrape.com: out of scope, so skipped.
  const detailLinks = new Set(listings.map((l) => l.link));
  const offSite = new Set<string>();
  for (const d of details) {
    const $ = cheerio.load(readFileSync(join(root, new URL(d.url).pathname), 'utf8'));
    $('article.product_pod h3 a').each((_, a) => {
      const link = new URL($(a).attr('href')!, d.url).href;
      (link.startsWith(`${base}/`) ? detailLinks : offSite).add(link);
    });
  }
  return { listings, details, detailLinks, offSite };
}

export const LISTING_FIELDS = ['type', 'link', 'title', 'price', 'rating'];
export const BOOK_FIELDS = ['type', 'url', 'title', 'price', 'upc', 'availability', 'rating'];

/**
 * Asserts that a crawl of the books copy stored exactly the truth's listings and books. `addToBook`
 * adds the fields a spider computes beyond the declarative ones (compared too).
 */
export function expectBooksItems(
  items: Record<string, unknown>[],
  truth: ReturnType<typeof booksTruth>,
  addToBook: (book: (typeof truth.details)[number]) => Record<string, unknown> = () => ({}),
): void {
  const extra = truth.details.length > 0 ? Object.keys(addToBook(truth.details[0]!)) : [];
  const bookFields = [...BOOK_FIELDS, ...extra];
  expect(
    comparable(
      items.filter((i) => i.type === 'listing'),
      LISTING_FIELDS,
    ),
  ).toEqual(comparable(truth.listings, LISTING_FIELDS));
  expect(
    comparable(
      items.filter((i) => i.type === 'book'),
      bookFields,
    ),
  ).toEqual(
    comparable(
      truth.details.map((d) => ({ ...d, ...addToBook(d) })),
      bookFields,
    ),
  );
}
