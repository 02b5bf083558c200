import type { Spider } from '@crawlfleet/core';
import type { Extraction } from '@crawlfleet/extract';

/** `<script ...>` opening tags, and the value of a `type` attribute in one. */
const SCRIPT_TAG = /<script\b([^>]*)>/gi;
const TYPE_ATTRIBUTE = /\btype\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))/i;
/** The types a browser runs (HTML's JavaScript MIME type essence matches, and modules); the rest are data (JSON, JSON-LD, templates). */
const RUNNABLE_TYPE = /^(?:|module|(?:text|application)\/(?:x-)?(?:javascript|ecmascript)|text\/(?:jscript|livescript)|text\/javascript1\.[0-5])$/i;

/**
 * Pure: could a browser's scripts change what this page holds? Only a page with a script a browser
 * runs (one with no type, a JavaScript type, or a module) can be built by script; a page with none
 * is complete as served, whatever it lacks.
 */
export function mayBeScriptBuilt(html: string): boolean {
  for (const [, attributes] of html.matchAll(SCRIPT_TAG)) {
    const type = TYPE_ATTRIBUTE.exec(attributes ?? '');
    const value = type ? (type[1] ?? type[2] ?? type[3] ?? '').trim().split(';')[0]!.trim() : '';
    if (RUNNABLE_TYPE.test(value)) return true;
  }
  return false;
}

/**
 * Pure: did the spider's rules find what they look for in this page? Where item rules apply to the
 * URL, that is at least one valid item (every required field present); where none does, that is at
 * least one link to follow (a listing), if the spider follows links at all.
 */
export function rulesFoundContent(spider: Pick<Spider, 'items' | 'follow'>, url: string, extraction: Pick<Extraction, 'items' | 'links'>): boolean {
  const itemRulesApply = spider.items.some((rule) => rule.match === undefined || new RegExp(rule.match).test(url));
  if (itemRulesApply) return extraction.items.length > 0;
  return spider.follow.length === 0 || extraction.links.length > 0;
}

/**
 * Pure: `render: "auto"`'s verdict on a plain page: it goes to a browser when the rules found
 * nothing in it and it has scripts that could have built it. A page the rules read, or one with no
 * script, is parsed as fetched (counted renderSkipped).
 */
export function needsRendering(spider: Pick<Spider, 'items' | 'follow'>, url: string, html: string, extraction: Pick<Extraction, 'items' | 'links'>): boolean {
  return mayBeScriptBuilt(html) && !rulesFoundContent(spider, url, extraction);
}

/**
 * Pure: the kind of page a URL is, for what `render: "auto"` learns: its host and its path's
 * directory, with digits folded (`shop.example/app/item/` for `/app/item/31.html`). Pages of one
 * kind are built alike on most sites (a template per directory), while one host often serves plain
 * pages and script-built ones side by side; a site of flat URLs learns per host.
 */
export function pageKindOf(url: string): string {
  const { host, pathname } = new URL(url);
  return `${host}${pathname.slice(0, pathname.lastIndexOf('/') + 1).replace(/\d+/g, '0')}`;
}

/** What `render: "auto"` has learnt of a kind of page: its pages that needed a browser, and those that did not. */
export interface KindRenderStats {
  rendered: number;
  plain: number;
}

/** Pages of a kind judged before its pages may go straight to render. */
export const LEARN_AFTER_PAGES = 5;
/** The share of a kind's judged pages that needed a browser for its pages to go straight to render. */
export const LEARN_RENDER_SHARE = 0.8;
/** The share of a learnt kind's pages still fetched plain and judged, so that a site that changes is noticed (Crawlee's renderingTypeDetectionRatio). */
export const DETECTION_SAMPLE = 0.1;

/**
 * Pure: where `render: "auto"` sends a URL of a kind of page (pageKindOf): straight to a browser,
 * once enough pages of its kind needed one (no plain fetch spent on it), but for a sample still
 * judged from its plain page; otherwise to the plain fetch, which judges it. `draw` is a uniform
 * number in [0, 1).
 */
export function autoRoute(stats: KindRenderStats, draw: number): 'render' | 'judge' {
  const judged = stats.rendered + stats.plain;
  if (judged < LEARN_AFTER_PAGES || stats.rendered < LEARN_RENDER_SHARE * judged) return 'judge';
  return draw < DETECTION_SAMPLE ? 'judge' : 'render';
}

/**
 * Pure: what the spider's rules look for on this URL, as groups of CSS selectors: the page has its
 * content once every selector of some group matches. An item rule that applies to the URL gives its
 * `each` and its required fields (or its first field, when none is required); without one, each
 * follow rule gives its selector. Empty when the rules look for nothing by CSS.
 */
export function contentSelectors(spider: Pick<Spider, 'items' | 'follow'>, url: string): string[][] {
  const groups: string[][] = [];
  for (const rule of spider.items) {
    if (rule.match !== undefined && !new RegExp(rule.match).test(url)) continue;
    const fields = Object.values(rule.fields).filter((f) => f.css !== undefined);
    if (fields.length === 0) continue;
    const required = fields.filter((f) => f.required);
    groups.push([...(rule.each ? [rule.each] : []), ...(required.length > 0 ? required : fields.slice(0, 1)).map((f) => f.css!)]);
  }
  if (groups.length > 0) return groups;
  return spider.follow.flatMap((f) => (f.css !== undefined ? [[f.css]] : []));
}
