import type { Spider } from '@crawlfleet/core';
import { canonicalizeUrl, passesAllowDeny } from '@crawlfleet/frontier';
import { compileRules, type CompiledField, type CompiledJsonFollowRule, type CompiledJsonItemRule } from './compile.js';
import type { FieldValue } from './convert.js';
import { missingFieldReason, type ExtractedItem, type Extraction, type PageMeta } from './extract.js';
import { evaluateJsonPath, type JsonValue } from './json-path.js';
import { isMissing, textFieldValue } from './resolve.js';

/**
 * Pure: one value a json field selected, as the field gives it.
 * - A string, number or boolean goes through the css fields' applyRegex and convertValue; with no
 *   `type`, `regex` or `absolute`, a number or boolean keeps its JSON type (12.5 stays 12.5), and a
 *   number with `type: "number"` stays that number.
 * - null is null; an object or an array is kept as it is when the field has no `type` or `regex`
 *   (else null: it does not convert).
 */
export function jsonFieldValue(value: unknown, field: Pick<CompiledField, 'type' | 'pattern' | 'absolute'>, pageUrl: string): FieldValue {
  if (value === null || value === undefined) return null;
  if (typeof value === 'object') return field.type === undefined && field.pattern === undefined ? (value as JsonValue) : null;
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') return null;
  if (!field.pattern && !field.absolute) {
    if (field.type === undefined && typeof value !== 'string') return value;
    if (field.type === 'number' && typeof value === 'number') return value;
  }
  return textFieldValue(String(value), field, pageUrl);
}

/**
 * Pure: a json field over its scope. With `all`, every value the path selects, in document order (a
 * selected array counts as its elements, as for eachJson), nulls left out; without, the first.
 */
function fieldOf(scope: unknown, field: CompiledField & { path: NonNullable<CompiledField['path']> }, pageUrl: string): FieldValue | FieldValue[] {
  const found = evaluateJsonPath(field.path, scope);
  if (!field.all) return jsonFieldValue(found[0], field, pageUrl);
  const values: FieldValue[] = [];
  for (const match of found) {
    for (const one of Array.isArray(match) ? match : [match]) {
      const value = jsonFieldValue(one, field, pageUrl);
      if (value !== null) values.push(value);
    }
  }
  return values;
}

/** The item's fields, or the name of the required field it lacks. */
function extractFields(scope: unknown, rule: CompiledJsonItemRule, pageUrl: string): ExtractedItem | string {
  const item: ExtractedItem = {};
  for (const field of rule.fields) {
    const value = fieldOf(scope, field, pageUrl);
    if (field.required && isMissing(value)) return field.name;
    item[field.name] = value;
  }
  return item;
}

/** The scopes of a rule's items: the elements eachJson selects (an array counts as its elements), else the document. */
function scopesOf(doc: unknown, rule: CompiledJsonItemRule): unknown[] {
  if (!rule.eachJson) return [doc];
  return evaluateJsonPath(rule.eachJson, doc).flatMap((match) => (Array.isArray(match) ? match : [match]));
}

/** Pure: a json follow rule's links: each string or number selected, through `format`, resolved and canonical. */
function linksOf(doc: unknown, rule: CompiledJsonFollowRule, pageUrl: string, links: Set<string>): void {
  for (const value of evaluateJsonPath(rule.path, doc)) {
    if (typeof value !== 'string' && !(typeof value === 'number' && Number.isFinite(value))) continue;
    const text = String(value).trim();
    if (text === '') continue;
    const href = rule.format ? `${rule.format.before}${encodeURIComponent(text)}${rule.format.after}` : text;
    const url = canonicalizeUrl(href, pageUrl);
    if (url && passesAllowDeny(url, rule.allow, rule.deny)) links.add(url);
  }
}

/**
 * Pure: a spider's json item and follow rules over one parsed JSON page (css rules are for HTML
 * pages). Field paths are relative to the item's scope: the element `eachJson` chose, else the
 * document. Links resolve against the page URL.
 */
export function extractJson(doc: unknown, pageUrl: string, spider: Spider, meta: PageMeta): Extraction {
  const rules = compileRules(spider);
  const items: ExtractedItem[] = [];
  const invalidReasons: string[] = [];
  for (const rule of rules.jsonItems) {
    if (rule.match && !rule.match.test(pageUrl)) continue;
    for (const scope of scopesOf(doc, rule)) {
      const fields = extractFields(scope, rule, pageUrl);
      if (typeof fields === 'string') {
        invalidReasons.push(missingFieldReason(rule.type, fields));
        continue;
      }
      items.push({ type: rule.type, url: pageUrl, ...fields, spider: spider.name, crawlId: meta.crawlId, fetchedAt: meta.fetchedAt });
    }
  }
  const links = new Set<string>();
  for (const rule of rules.jsonFollow) linksOf(doc, rule, pageUrl, links);
  return { items, invalid: invalidReasons.length, ...(invalidReasons.length > 0 ? { invalidReasons } : {}), links: [...links] };
}
