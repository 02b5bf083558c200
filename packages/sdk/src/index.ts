/**
 * The public face of crawlfleet for spider authors. A spider module exports
 * `defineSpider({...})`: the declarative settings of a JSON spider, plus optional hooks.
 *
 * ```ts
 * import { defineSpider, follow, z } from '@crawlfleet/sdk';
 * export default defineSpider({
 *   name: 'books',
 *   startUrls: ['http://127.0.0.1:8080/catalogue/page-1.html'],
 *   follow: [{ css: 'li.next a' }],
 *   *parse(page) {
 *     for (const el of page.$('article.product_pod').toArray()) yield { type: 'book', title: page.$(el).find('h3 a').attr('title') };
 *   },
 * });
 * ```
 */
import type { CheerioAPI } from 'cheerio';
// Types only: a spider module bundles this file, and must not pull in the fleet's runtime.
import type { ItemSchema, Spider, SpiderInput } from '@crawlfleet/core';
import { z } from 'zod';

// The same registry symbols as @crawlfleet/core's FOLLOW_MARK and SPIDER_MARK.
const FOLLOW_MARK: unique symbol = Symbol.for('crawlfleet.follow') as never;
const SPIDER_MARK = Symbol.for('crawlfleet.spider');

export { z };
export type { ItemSchema, Spider, SpiderInput };

/** Any value JSON can carry. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * An item: `type` names its kind (and MongoDB collection). `url` defaults to the page's URL;
 * `spider`, `crawlId` and `fetchedAt` are set by the fleet.
 */
export interface Item {
  type: string;
  url?: string;
  [field: string]: unknown;
}

/** The page a parse hook receives. */
export interface Page {
  /** the URL after redirects */
  url: string;
  /** the URL that was requested */
  requestedUrl: string;
  status: number;
  /** response headers, lower-case names; without Set-Cookie and other credential headers (docs/spider-format.md) */
  headers: Readonly<Record<string, string>>;
  contentType: string;
  /** the body decoded as a browser decodes it */
  text: string;
  /** the page parsed once, shared with the declarative rules (an empty document for a JSON response) */
  $: CheerioAPI;
  /** the body as JSON; throws when it is not JSON */
  json<T = unknown>(): T;
}

/** What every hook is told about the request it serves. */
export interface CrawlContext {
  crawlId: string;
  /** the spider's declarative settings, defaults filled in */
  spider: Spider;
  /** the request's depth: start URLs are 0 */
  depth: number;
  /** what the link that led here carried (`follow(url, { meta })`) */
  meta: Readonly<Record<string, unknown>>;
}

export interface ParseContext extends CrawlContext {
  /** what the declarative rules found on this page, read-only: a parse hook returns or yields what it adds, and the item hook changes items */
  rules: { items: Item[]; links: string[] };
}

export interface ItemContext extends CrawlContext {
  /** the page the item came from */
  pageUrl: string;
}

/** The request's session (the spider's `sessions`): one identity on the host, shared by the fleet. */
export interface RequestSession {
  id: string;
  /** the User-Agent the session sends */
  userAgent: string;
  /** the session's cookies for this URL, name -> value */
  cookies: Readonly<Record<string, string>>;
}

export interface RequestContext extends CrawlContext {
  /** the request's session; absent when the spider keeps none (`sessions.enabled: false`) */
  session?: RequestSession;
}

/** A link a parse hook follows: resolved against the page, then scoped (allowedDomains, maxDepth) like any link. */
export interface FollowRequest {
  readonly [FOLLOW_MARK]: true;
  url: string;
  /** default: the page's depth + 1 */
  depth?: number;
  /** small JSON data handed to the request and parse hooks of the linked page */
  meta?: Record<string, JsonValue>;
}

/** A link for a parse hook to return or yield. */
export function follow(url: string, options: { depth?: number; meta?: Record<string, JsonValue> } = {}): FollowRequest {
  return { [FOLLOW_MARK]: true, url, ...(options.depth !== undefined ? { depth: options.depth } : {}), ...(options.meta !== undefined ? { meta: options.meta } : {}) };
}

export type ParseYield = Item | FollowRequest;
export interface ParseOutput {
  items?: Item[];
  links?: Array<string | FollowRequest>;
}
// biome-ignore lint/suspicious/noConfusingVoidType: a hook may return nothing, and TypeScript types a function without a return as void
export type ParseResult = void | ParseOutput | Iterable<ParseYield> | AsyncIterable<ParseYield> | Promise<void | ParseOutput | Iterable<ParseYield>>;

/** What a request hook may add to one request. */
export interface RequestOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  headers?: Record<string, string>;
  /** cookies for this request alone, sent after the session's */
  cookies?: Record<string, string>;
  /** Set-Cookie lines the session keeps for its next requests too, as if the site had set them (`"token=abc; Path=/"`); needs a session */
  setCookies?: string[];
  /** a string is sent as it is; an object as JSON (with `content-type: application/json`) */
  body?: string | Record<string, JsonValue>;
}

export interface SpiderHooks {
  /** a zod schema per item type: an item that fails its type's schema is counted invalid, with the reason */
  schemas?: Record<string, ItemSchema>;
  /** runs after the declarative rules on every parsed page; returns or yields items and links */
  parse?(page: Page, ctx: ParseContext): ParseResult;
  /** runs before every request of the crawl (fetch stage): extra headers, cookies, method, body */
  // biome-ignore lint/suspicious/noConfusingVoidType: a hook may return nothing, and TypeScript types a function without a return as void
  request?(url: string, ctx: RequestContext): RequestOptions | void | Promise<RequestOptions | void>;
  /** runs on every item before the writer: return it (changed or not); throw to drop it, counted invalid with the message */
  // biome-ignore lint/suspicious/noConfusingVoidType: a hook may return nothing, and TypeScript types a function without a return as void
  item?(item: Item, ctx: ItemContext): Item | void | null | Promise<Item | void | null>;
}

export type SpiderDefinition = SpiderInput & SpiderHooks;

/** Declares a code spider: settings as in a JSON spider, plus hooks. Export it as the module's default. */
export function defineSpider<const T extends SpiderDefinition>(definition: T): T {
  Object.defineProperty(definition, SPIDER_MARK, { value: true, enumerable: false });
  return definition;
}
