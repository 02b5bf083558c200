import * as cheerio from 'cheerio';
import { FOLLOW_MARK, MAX_LINK_META_BYTES, SpiderHookError, hookFailure, itemKeyFields, withinHookDeadline, type ItemSchema, type LoadedSpiderModule, type Spider } from '@crawlfleet/core';
import { canonicalizeUrl } from '@crawlfleet/frontier';
import type { CrawlContext, FollowRequest, Item, Page } from '@crawlfleet/sdk';
import type { ExtractedItem } from './extract.js';
import type { ParsedDocument } from './response.js';

/** The page and request a parse stage hands to a code spider. */
export interface HookPage {
  url: string;
  requestedUrl: string;
  status: number;
  headers: Record<string, string>;
  contentType: string;
  text: string;
  /** the page parsed once, by the rules: an HTML tree or a JSON value */
  doc: ParsedDocument;
  crawlId: string;
  fetchedAt: string;
  depth: number;
  meta: Record<string, unknown>;
}

/** A link to admit: its URL in canonical form, the depth it is found at, and what it carries. */
export interface PageLink {
  url: string;
  depth: number;
  meta?: Record<string, unknown>;
}

/** What a page gives once the declarative rules and the code spider's hooks have run. */
export interface PageOutput {
  items: ExtractedItem[];
  links: PageLink[];
  invalid: number;
  /** why items were dropped, one line each (for the crawl's sample in status) */
  invalidReasons: string[];
}

const ITEM_TYPE = /^[A-Za-z][A-Za-z0-9_-]*$/;
const MAX_REASON = 300;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isFollow(value: unknown): value is FollowRequest {
  return isObject(value) && (value as Record<PropertyKey, unknown>)[FOLLOW_MARK] === true;
}

/** The most a parse hook may give for one page, items and links together: past it the hook has run away. */
export const MAX_HOOK_OUTPUTS_PER_PAGE = 100_000;

/**
 * Sorts what a parse hook returned or yielded into items and links. `stop.stopped` ends a generator
 * (its `return` runs) once the page's deadline has passed, so it does not go on in the background.
 */
async function collect(result: unknown, out: { items: unknown[]; links: unknown[] }, stop: { stopped: boolean }): Promise<void> {
  const value = await result;
  if (value === undefined || value === null) return;
  let count = 0;
  const push = (v: unknown) => {
    if (++count > MAX_HOOK_OUTPUTS_PER_PAGE) throw new Error(`gave more than ${MAX_HOOK_OUTPUTS_PER_PAGE} items and links for one page`);
    (typeof v === 'string' || isFollow(v) ? out.links : out.items).push(v);
  };
  if (typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
    for await (const v of value as AsyncIterable<unknown>) {
      if (stop.stopped) break;
      push(v);
    }
  } else if (typeof value !== 'string' && typeof (value as Iterable<unknown>)[Symbol.iterator] === 'function') {
    for (const v of value as Iterable<unknown>) push(v);
  } else if (isObject(value) && ('items' in value || 'links' in value)) {
    for (const v of (value.items as unknown[] | undefined) ?? []) out.items.push(v);
    for (const v of (value.links as unknown[] | undefined) ?? []) out.links.push(v);
  } else push(value);
}

function hookContext(page: HookPage, spider: Spider): CrawlContext {
  return { crawlId: page.crawlId, spider, depth: page.depth, meta: page.meta };
}

let empty: cheerio.CheerioAPI | undefined;
/** A JSON page's `$`: an empty document, so a hook written for HTML finds nothing rather than failing. */
function emptyDocument(): cheerio.CheerioAPI {
  empty ??= cheerio.load('');
  return empty;
}

function sdkPage(page: HookPage): Page {
  const { doc } = page;
  let parsed: { value: unknown } | undefined = doc.kind === 'json' ? { value: doc.value } : undefined;
  return {
    url: page.url,
    requestedUrl: page.requestedUrl,
    status: page.status,
    headers: page.headers,
    contentType: page.contentType,
    text: page.text,
    $: doc.kind === 'html' ? doc.$ : emptyDocument(),
    json<T>() {
      parsed ??= { value: JSON.parse(page.text) as unknown };
      return parsed.value as T;
    },
  };
}

/** Pure: an item as the writer stores it: the fleet's own fields set, `url` the page's unless the item names one. */
function stamp(item: Record<string, unknown>, page: HookPage, spider: Spider): ExtractedItem {
  return { ...item, url: typeof item.url === 'string' ? item.url : page.url, spider: spider.name, crawlId: page.crawlId, fetchedAt: page.fetchedAt } as ExtractedItem;
}

/** Pure: a link a hook gave, resolved against the page and canonical; undefined when it is not an http(s) URL. */
function toLink(value: unknown, page: HookPage): PageLink | undefined {
  const follow: Partial<FollowRequest> = isFollow(value) ? value : { url: value as string };
  if (typeof follow.url !== 'string') return undefined;
  const url = canonicalizeUrl(follow.url.trim(), page.url);
  if (!url) return undefined;
  const depth = typeof follow.depth === 'number' && Number.isInteger(follow.depth) && follow.depth >= 0 ? follow.depth : page.depth + 1;
  if (!isObject(follow.meta) || Object.keys(follow.meta).length === 0) return { url, depth };
  // The metadata travels as JSON in the frontier and two jobs: it must be JSON, and small.
  const json = JSON.stringify(follow.meta);
  if (Buffer.byteLength(json) > MAX_LINK_META_BYTES) throw new Error(`follow(${JSON.stringify(follow.url)}): meta is ${Buffer.byteLength(json)} bytes of JSON; at most ${MAX_LINK_META_BYTES}`);
  return { url, depth, meta: JSON.parse(json) as Record<string, unknown> };
}

/**
 * Runs a code spider over one page after its declarative rules: the parse hook adds items and
 * links, then every item (the rules' and the hook's) goes through the item hook, its type's schema
 * and the key check. A parse hook that throws fails the page (SpiderHookError); an item that fails
 * is dropped and counted invalid with the reason.
 */
export async function runPageHooks(
  module: LoadedSpiderModule | undefined,
  page: HookPage,
  spider: Spider,
  rules: { items: ExtractedItem[]; links: string[]; invalid: number; invalidReasons?: string[] },
): Promise<PageOutput> {
  const ruleLinks: PageLink[] = rules.links.map((url) => ({ url, depth: page.depth + 1 }));
  const candidates: unknown[] = [...rules.items];
  const links: PageLink[] = [...ruleLinks];
  const reasons: string[] = [];
  const ruleReasons = rules.invalidReasons ?? [];
  const code = module?.code;
  if (code?.parse) {
    const found = { items: [] as unknown[], links: [] as unknown[] };
    try {
      // Read-only copies: the hook adds items and links by returning or yielding them, and changes a
      // rule's items in the item hook, where every item is checked again.
      const ruleItems = Object.freeze(rules.items.map((item) => Object.freeze({ ...item })));
      const ctx = { ...hookContext(page, spider), rules: Object.freeze({ items: ruleItems as unknown as Item[], links: Object.freeze([...rules.links]) as string[] }) };
      const stop = { stopped: false };
      try {
        await withinHookDeadline(collect(code.parse(sdkPage(page) as never, ctx as never), found, stop), spider.limits.timeoutMs);
      } finally {
        stop.stopped = true;
      }
      for (const value of found.links) {
        const link = toLink(value, page);
        if (link) links.push(link);
      }
    } catch (err) {
      throw new SpiderHookError('parse', err, module!.locate(err));
    }
    for (const value of found.items) {
      if (!isObject(value) || typeof value.type !== 'string' || !ITEM_TYPE.test(value.type)) {
        reasons.push(`parse hook gave an item without a valid "type" (letters, digits, "_" and "-", starting with a letter)`);
        continue;
      }
      candidates.push(stamp(value, page, spider));
    }
  }
  const items: ExtractedItem[] = [];
  if (!code?.item && !code?.schemas && code?.parse === undefined) return { items: rules.items, links, invalid: rules.invalid, invalidReasons: ruleReasons };
  const keys = itemKeyFields(spider);
  for (const candidate of candidates) {
    const checked = await checkItem(candidate as ExtractedItem, module!, page, spider, keys);
    if (typeof checked === 'string') reasons.push(checked.length > MAX_REASON ? `${checked.slice(0, MAX_REASON)}…` : checked);
    else items.push(checked);
  }
  return { items, links, invalid: rules.invalid + reasons.length, invalidReasons: [...ruleReasons, ...reasons] };
}

/** The item hook, the type's schema and the key field: the item to store, or why it is dropped. */
async function checkItem(candidate: ExtractedItem, module: LoadedSpiderModule, page: HookPage, spider: Spider, keys: Record<string, string>): Promise<ExtractedItem | string> {
  const { code } = module;
  let item = candidate as Record<string, unknown>;
  const type = item.type as string;
  if (code.item) {
    let result: unknown;
    try {
      result = await withinHookDeadline(Promise.resolve(code.item(item as never, { ...hookContext(page, spider), pageUrl: page.url } as never)), spider.limits.timeoutMs);
    } catch (err) {
      return `${type}: ${hookFailure('item', err, module.locate(err))}`;
    }
    if (result === null || result === false) return `${type}: dropped by the item hook`;
    // A returned item, or the same one changed in place: either way its type is checked and the fleet's fields set again.
    const returned = result === undefined ? item : result;
    if (!isObject(returned) || typeof returned.type !== 'string' || !ITEM_TYPE.test(returned.type)) return `${type}: the item hook returned something that is not an item with a valid "type"`;
    item = stamp(returned, page, spider);
  }
  const itemType = item.type as string;
  const schema = code.schemas?.[itemType];
  if (schema) {
    let checked: Awaited<ReturnType<ItemSchema['safeParse']>>;
    try {
      // safeParseAsync where the schema has it: a zod schema with an async refinement throws in safeParse
      const parse = (schema as { safeParseAsync?: ItemSchema['safeParse'] }).safeParseAsync ?? schema.safeParse;
      checked = await withinHookDeadline(Promise.resolve(parse.call(schema, item)), spider.limits.timeoutMs);
    } catch (err) {
      return `${itemType}: ${hookFailure('schema', err, module.locate(err))}`;
    }
    if (!checked.success) {
      const problems = checked.error.issues.map((i) => `${i.path.length > 0 ? i.path.map(String).join('.') : '(item)'}: ${i.message}`);
      return `${itemType}: ${problems.join('; ')}`;
    }
    // The schema's coercions and defaults apply; fields it does not name are kept.
    if (isObject(checked.data)) item = stamp({ ...item, ...checked.data }, page, spider);
  }
  const key = keys[itemType] ?? 'url';
  const keyValue = item[key];
  if (keyValue === undefined || keyValue === null || keyValue === '') return `${itemType}: missing its key field "${key}"`;
  return item as ExtractedItem;
}
