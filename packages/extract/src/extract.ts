import type * as cheerio from 'cheerio';
import type { AnyNode } from 'domhandler';
import type { Spider } from '@crawlfleet/core';
import { canonicalizeUrl, passesAllowDeny } from '@crawlfleet/frontier';
import { compileRules, type CompiledField, type CompiledItemRule } from './compile.js';
import type { FieldValue, ScalarValue } from './convert.js';
import { parseHtml, type HtmlParser } from './parse-html.js';
import { isMissing, textFieldValue } from './resolve.js';

export interface PageMeta {
  crawlId: string;
  fetchedAt: string;
}

export type ExtractedItem = Record<string, FieldValue | FieldValue[]>;

export interface Extraction {
  items: ExtractedItem[];
  /** items dropped for a missing required field */
  invalid: number;
  /** why, one line per dropped item (`book: missing required field "upc"`); absent when none was */
  invalidReasons?: string[];
  /** canonical URLs of the links the follow rules chose, in document order, unique */
  links: string[];
}

type Doc = cheerio.CheerioAPI;

/** The page's base for relative links: `<base href>` when present, resolved against the page URL. */
function baseUrlOf($: Doc, pageUrl: string): string {
  const href = $('base[href]').first().attr('href');
  if (!href) return pageUrl;
  try {
    return new URL(href.trim(), pageUrl).href;
  } catch {
    return pageUrl;
  }
}

function rawValue($: Doc, el: AnyNode, field: CompiledField): string | undefined {
  return field.attr ? $(el).attr(field.attr) : $(el).text();
}

function fieldValue($: Doc, el: AnyNode, field: CompiledField, base: string): ScalarValue {
  const raw = rawValue($, el, field);
  if (raw === undefined) return null;
  return textFieldValue(raw, field, base);
}

/** The item's fields, or the name of the required field it lacks. */
function extractFields($: Doc, scope: cheerio.Cheerio<AnyNode>, rule: CompiledItemRule, base: string): ExtractedItem | string {
  const item: ExtractedItem = {};
  for (const field of rule.fields) {
    const found = scope.find(field.css!);
    let value: FieldValue | FieldValue[];
    if (field.all)
      value = found
        .toArray()
        .map((el) => fieldValue($, el, field, base))
        .filter((v) => v !== null);
    else value = found.length > 0 ? fieldValue($, found[0]!, field, base) : null;
    if (field.required && isMissing(value)) return field.name;
    item[field.name] = value;
  }
  return item;
}

/** Pure: the line that says why an item was dropped for lacking a required field. */
export function missingFieldReason(type: string, field: string): string {
  return `${type}: missing required field "${field}"`;
}

/**
 * Pure: applies a spider's css item and follow rules to one HTML page. No I/O, so it is tested directly and
 * timed in the benchmarks. The page is parsed once, and every rule queries that one tree.
 */
export function extractPage(html: string, pageUrl: string, spider: Spider, meta: PageMeta, parser?: HtmlParser): Extraction {
  return extractParsed(parseHtml(html, parser).$, pageUrl, spider, meta);
}

/** Pure: the css rules over a parsed HTML page (json rules are for JSON pages: see extractResponse). */
export function extractParsed($: Doc, pageUrl: string, spider: Spider, meta: PageMeta): Extraction {
  const rules = compileRules(spider);
  const base = baseUrlOf($, pageUrl);
  const items: ExtractedItem[] = [];
  const invalidReasons: string[] = [];
  for (const rule of rules.items) {
    if (rule.match && !rule.match.test(pageUrl)) continue;
    const scopes = rule.each
      ? $(rule.each)
          .toArray()
          .map((el) => $(el))
      : [$.root()];
    for (const scope of scopes) {
      const fields = extractFields($, scope, rule, base);
      if (typeof fields === 'string') {
        invalidReasons.push(missingFieldReason(rule.type, fields));
        continue;
      }
      items.push({ type: rule.type, url: pageUrl, ...fields, spider: spider.name, crawlId: meta.crawlId, fetchedAt: meta.fetchedAt });
    }
  }
  const links = new Set<string>();
  for (const rule of rules.follow) {
    $(rule.css).each((_, el) => {
      const href = $(el).attr(rule.attr);
      if (!href) return;
      const url = canonicalizeUrl(href.trim(), base);
      if (url && passesAllowDeny(url, rule.allow, rule.deny)) links.add(url);
    });
  }
  return { items, invalid: invalidReasons.length, ...(invalidReasons.length > 0 ? { invalidReasons } : {}), links: [...links] };
}
