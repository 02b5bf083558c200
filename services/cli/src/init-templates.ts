import { isIP } from 'node:net';

/** What every template is filled with. */
export interface StarterSettings {
  name: string;
  startUrl: string;
  /** `host` or `host:port` of the start URL */
  domain: string;
  /** the start URL is on loopback (the demo site on this machine) */
  loopback: boolean;
}

/** The demo site: the copy of books.toscrape.com that `node test/fixtures/serve.mjs books 8080` serves. */
export const DEMO_START_URL = 'http://127.0.0.1:8080/index.html';

export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

export function starterSettings(name: string, startUrl: string): StarterSettings {
  const url = new URL(startUrl);
  return { name, startUrl: url.href, domain: url.host, loopback: isLoopbackHost(url.hostname) };
}

// The rules, shared by the templates (the YAML one spells them out with comments).
const LISTING_MATCH = '^https?://[^/]+/(index\\.html)?$|/catalogue/page-\\d+\\.html$';
const BOOK_MATCH = '/catalogue/[^/]+_\\d+/index\\.html$';
const MAX_PAGES = 5000;

/** The JSON starter: the same spider as the YAML one, without comments (JSON has none). */
export function starterObject(s: StarterSettings, schemaRef: string): Record<string, unknown> {
  return {
    $schema: schemaRef,
    name: s.name,
    startUrls: [s.startUrl],
    allowedDomains: [s.domain],
    maxPages: MAX_PAGES,
    obeyRobotsTxt: true,
    allowPrivateAddresses: s.loopback,
    follow: [{ css: 'li.next a' }, { css: 'article.product_pod h3 a' }],
    items: [
      {
        type: 'listing',
        match: LISTING_MATCH,
        each: 'article.product_pod',
        key: 'link',
        fields: {
          link: { css: 'h3 a', attr: 'href', absolute: true, required: true },
          title: { css: 'h3 a', attr: 'title', required: true },
          price: { css: '.price_color', regex: '([0-9.]+)', type: 'number' },
          rating: { css: 'p.star-rating', attr: 'class', regex: 'star-rating (\\w+)' },
        },
      },
      {
        type: 'book',
        match: BOOK_MATCH,
        key: 'upc',
        fields: {
          title: { css: '.product_main h1', required: true },
          price: { css: '.product_main .price_color', regex: '([0-9.]+)', type: 'number' },
          upc: { css: 'table.table tr:first-child td', required: true },
          availability: { css: '.product_main .availability' },
          inStock: { css: '.product_main .availability', regex: '\\((\\d+) available\\)', type: 'integer' },
          rating: { css: '.product_main p.star-rating', attr: 'class', regex: 'star-rating (\\w+)' },
        },
      },
    ],
  };
}

export function jsonTemplate(s: StarterSettings, schemaRef: string): string {
  return `${JSON.stringify(starterObject(s, schemaRef), null, 2)}\n`;
}

function privateAddressComment(s: StarterSettings, indent: string, mark: string): string {
  const lines = s.loopback
    ? [
        'The SSRF guard refuses loopback, private and link-local addresses unless this is true.',
        `It is true here only because the start URL is on loopback (${s.domain}, the demo site on`,
        'this machine). Leave it false for sites on the internet.',
      ]
    : ['The SSRF guard refuses loopback, private and link-local addresses while this is false.', 'Set it to true (or list the ranges in allowedAddresses) only for a site on your own network.'];
  return lines.map((l) => `${indent}${mark} ${l}`).join('\n');
}

/** YAML single-quoted scalar: no escapes but '' for a quote, so regexes stay as written. */
const sq = (value: string) => `'${value.replaceAll("'", "''")}'`;

function header(s: StarterSettings, file: string, mark: string, extra: string[] = []): string {
  const demo = s.loopback && s.domain.startsWith('127.0.0.1:') ? [`The demo site: node test/fixtures/serve.mjs books ${s.domain.split(':')[1]} (from the crawlfleet repository).`] : [];
  return [
    `${s.name}: a starter crawlfleet spider, written by \`crawlfleet init\`. Edit it to fit your site.`,
    'It crawls the books demo site (a copy of books.toscrape.com): the catalogue pages, every',
    'book page, a `listing` item per book in the catalogue and a `book` item per book page.',
    ...demo,
    ...extra,
    `Check it:              crawlfleet validate ${file}`,
    `Try it on one page:    crawlfleet shell ${s.startUrl} --spider ${file}`,
    `Crawl:                 crawlfleet crawl ${file}`,
  ]
    .map((l) => `${mark} ${l}`)
    .join('\n');
}

/** The YAML starter: its settings, follow rules and item rules, each spelt out with comments. */
export function yamlTemplate(s: StarterSettings, schemaRef: string, file: string): string {
  return `${[yamlSettings(s, schemaRef, file), yamlFollow(), yamlItems(), yamlMore()].join('\n\n')}\n`;
}

/** The YAML starter's header and its settings, down to allowPrivateAddresses. */
function yamlSettings(s: StarterSettings, schemaRef: string, file: string): string {
  return `# yaml-language-server: $schema=${schemaRef}
${header(s, file, '#')}

# The spider's name: letters, digits, "_", "." and "-". Crawl ids start with it.
name: ${JSON.stringify(s.name)}

# Where the crawl starts. \`crawlfleet seed\` can add more URLs.
startUrls:
  - ${JSON.stringify(s.startUrl)}

# Hosts ("host" or "host:port") whose links are followed; a link anywhere else is skipped.
allowedDomains:
  - ${JSON.stringify(s.domain)}

# A safety net: no new URL is admitted after this many pages. Raise it or remove it.
maxPages: ${MAX_PAGES}

# Fetch each host's /robots.txt first and obey it (the demo site has none: everything is allowed).
obeyRobotsTxt: true

${privateAddressComment(s, '', '#')}
allowPrivateAddresses: ${s.loopback}`;
}

/** The YAML starter's follow rules. */
function yamlFollow(): string {
  return `# Which links to follow from every fetched page: \`css\` picks elements and their href (or \`attr\`)
# is the link; optional \`allow\` and \`deny\` URL regexes filter the links.
follow:
  # the catalogue's pagination ("next")
  - css: 'li.next a'
  # every book's page, from the catalogue (and the "recommended" books on a book page)
  - css: 'article.product_pod h3 a'`;
}

/** The YAML starter's item rules: a `listing` per book of a catalogue page, a `book` per book page. */
function yamlItems(): string {
  return `# What to extract: each rule makes items of one \`type\` from the pages its \`match\` regex selects.
# Every item also gets type, url (the page), spider, crawlId and fetchedAt.
items:
  # one \`listing\` item per book of a catalogue page: \`each\` makes one item per matching element,
  # with the fields looked up inside it
  - type: listing
    match: ${sq(LISTING_MATCH)}
    each: 'article.product_pod'
    # \`key\` names the field that identifies the item (the upsert key in MongoDB; default: url)
    key: link
    fields:
      # \`attr\` reads an attribute (default: the element's text); \`absolute\` resolves a URL against
      # the page; an item missing a \`required\` field is dropped and counted invalid
      link:   { css: 'h3 a', attr: href, absolute: true, required: true }
      title:  { css: 'h3 a', attr: title, required: true }
      # \`regex\` keeps its first capture group; \`type\` converts: string, number, integer or boolean
      price:  { css: '.price_color', regex: ${sq('([0-9.]+)')}, type: number }
      rating: { css: 'p.star-rating', attr: class, regex: ${sq('star-rating (\\w+)')} }

  # one \`book\` item per book page (no \`each\`: one item per page)
  - type: book
    match: ${sq(BOOK_MATCH)}
    key: upc
    fields:
      title:        { css: '.product_main h1', required: true }
      price:        { css: '.product_main .price_color', regex: ${sq('([0-9.]+)')}, type: number }
      upc:          { css: 'table.table tr:first-child td', required: true }
      availability: { css: '.product_main .availability' }
      inStock:      { css: '.product_main .availability', regex: ${sq('\\((\\d+) available\\)')}, type: integer }
      rating:       { css: '.product_main p.star-rating', attr: class, regex: ${sq('star-rating (\\w+)')} }`;
}

/** The YAML starter's closing pointer to the settings it leaves out. */
function yamlMore(): string {
  return `# More settings (see the README): maxDepth, politeness (concurrencyPerHost, delayPerHost,
# autoThrottle), hosts, retry, proxies, userAgents, sitemapUrls, blockPatterns, limits.`;
}

/** A single-quoted TypeScript string literal. */
const tsString = (v: string) => `'${v.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;

/** The code-spider starter, written against @crawlfleet/sdk. */
export function tsTemplate(s: StarterSettings, file: string): string {
  return `${[tsSettings(s, file), tsRules(), tsParse(), tsHooks()].join('\n\n')}\n`;
}

/** The code starter's header, imports and page patterns, and the spider's settings down to allowPrivateAddresses. */
function tsSettings(s: StarterSettings, file: string): string {
  return `${header(s, file, '//', ['A code spider: it needs the @crawlfleet/sdk package.'])}
import { defineSpider, follow, z } from '@crawlfleet/sdk';

/** The catalogue pages (the home page is the first one) and the book pages of the site. */
const LISTING_PAGE = /^https?:\\/\\/[^/]+\\/(index\\.html)?$|\\/catalogue\\/page-\\d+\\.html$/;
const BOOK_PAGE = /\\/catalogue\\/[^/]+_\\d+\\/index\\.html$/;

export default defineSpider({
  // The settings are those of a JSON or YAML spider (see \`crawlfleet init NAME --format yaml\`).
  name: ${tsString(s.name)},
  startUrls: [${tsString(s.startUrl)}],
  allowedDomains: [${tsString(s.domain)}],
  maxPages: ${MAX_PAGES},
  obeyRobotsTxt: true,
${privateAddressComment(s, '  ', '//')}
  allowPrivateAddresses: ${s.loopback},`;
}

/** The code starter's declarative rules: follow, items and the zod schemas. */
function tsRules(): string {
  return `  // Declarative follow rules, as in a JSON spider: every book page linked from a catalogue page (and
  // the "recommended" books of a book page). The pagination is followed from parse() below.
  follow: [{ css: 'article.product_pod h3 a' }],

  // Declarative item rules, as in a JSON spider, run before parse(). This spider builds its items in code.
  items: [],

  // Optional: a zod schema per item type. An item that fails it is dropped and counted invalid.
  schemas: {
    book: z.object({ title: z.string().min(1), price: z.number(), upc: z.string().min(1), inStock: z.number().int() }).passthrough(),
  },`;
}

/** The code starter's parse(): the pagination followed, a `book` item built in code. */
function tsParse(): string {
  return `  // parse(page, ctx) runs on every fetched page, after the declarative rules. \`page\` has url, status,
  // headers, text, $ (the page parsed with cheerio) and json(). Yield items ({ type, ...fields })
  // and links (follow(url, { depth?, meta? })), or return { items, links }.
  *parse(page, ctx) {
    const $ = page.$;
    if (LISTING_PAGE.test(page.url)) {
      // the catalogue's "next" page; \`meta\` travels with the link
      const next = $('li.next a').attr('href');
      if (next) yield follow(new URL(next, page.url).href, { meta: { from: page.url } });
      return;
    }
    if (!BOOK_PAGE.test(page.url)) return;
    const availability = $('.product_main .availability').text().trim();
    const price = Number($('.product_main .price_color').first().text().replace(/[^0-9.]/g, ''));
    yield {
      type: 'book',
      title: $('.product_main h1').text().trim(),
      price,
      upc: $('table.table tr').first().find('td').text().trim(),
      availability,
      inStock: Number(/\\((\\d+) available\\)/.exec(availability)?.[1] ?? 0),
      rating: $('.product_main p.star-rating').attr('class')?.split(/\\s+/)[1] ?? null,
      // a computed field
      priceBand: price < 20 ? 'budget' : price < 40 ? 'mid-range' : 'premium',
    };
  },`;
}

/** The code starter's request and item hooks, and the end of the spider. */
function tsHooks(): string {
  return `  // request(url, ctx) runs in the fetch stage before each request: extra headers, cookies, a method
  // or a body for this URL.
  request(url, ctx) {
    return { headers: { 'accept-language': 'en' } };
  },

  // item(item, ctx) sees every item before the writer: return it (changed or not), or throw to drop it
  // (counted invalid, with the reason).
  item(item, ctx) {
    if (item.type === 'book' && !(Number(item.price) > 0)) throw new Error('a book without a price');
    return item;
  },
});`;
}
