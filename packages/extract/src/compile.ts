import type { FieldRule, FollowRule, ItemRule, Spider } from '@crawlfleet/core';
import { compileJsonPath, type JsonPath } from './json-path.js';

/** A spider's rules with their regular expressions and JSON paths compiled once. */
export interface CompiledField extends FieldRule {
  name: string;
  pattern?: RegExp;
  /** a json field's path */
  path?: JsonPath;
}

export interface CompiledItemRule {
  type: string;
  key: string;
  match?: RegExp;
  each?: string;
  fields: CompiledField[];
}

/** An item rule of json fields, for JSON pages. */
export interface CompiledJsonItemRule {
  type: string;
  key: string;
  match?: RegExp;
  eachJson?: JsonPath;
  fields: (CompiledField & { path: JsonPath })[];
}

export interface CompiledFollowRule {
  css: string;
  attr: string;
  allow: RegExp[];
  deny: RegExp[];
}

/** A follow rule of a JSON path, for JSON pages; `format` split at its `{}`. */
export interface CompiledJsonFollowRule {
  path: JsonPath;
  format?: { before: string; after: string };
  allow: RegExp[];
  deny: RegExp[];
}

export interface CompiledRules {
  /** the css item rules, for HTML pages */
  items: CompiledItemRule[];
  /** the css follow rules, for HTML pages */
  follow: CompiledFollowRule[];
  /** the json item rules, for JSON pages */
  jsonItems: CompiledJsonItemRule[];
  /** the json follow rules, for JSON pages */
  jsonFollow: CompiledJsonFollowRule[];
}

function compileField(name: string, f: FieldRule): CompiledField {
  return { ...f, name, ...(f.regex !== undefined ? { pattern: new RegExp(f.regex) } : {}), ...(f.json !== undefined ? { path: compileJsonPath(f.json) } : {}) };
}

/** A rule is json when it has eachJson or a json field (the schema keeps a rule's fields all one kind). */
function isJsonRule(rule: ItemRule): boolean {
  return rule.eachJson !== undefined || Object.values(rule.fields).some((f) => f.json !== undefined);
}

function compileItem(rule: ItemRule): CompiledItemRule {
  return {
    type: rule.type,
    key: rule.key ?? 'url',
    ...(rule.match !== undefined ? { match: new RegExp(rule.match) } : {}),
    ...(rule.each !== undefined ? { each: rule.each } : {}),
    fields: Object.entries(rule.fields).map(([name, f]) => compileField(name, f)),
  };
}

function compileJsonItem(rule: ItemRule): CompiledJsonItemRule {
  return {
    type: rule.type,
    key: rule.key ?? 'url',
    ...(rule.match !== undefined ? { match: new RegExp(rule.match) } : {}),
    ...(rule.eachJson !== undefined ? { eachJson: compileJsonPath(rule.eachJson) } : {}),
    fields: Object.entries(rule.fields).map(([name, f]) => ({ ...compileField(name, f), path: compileJsonPath(f.json ?? '$') })),
  };
}

function compileFollow(rule: FollowRule & { css: string }): CompiledFollowRule {
  return { css: rule.css, attr: rule.attr ?? 'href', allow: (rule.allow ?? []).map((r) => new RegExp(r)), deny: (rule.deny ?? []).map((r) => new RegExp(r)) };
}

function compileJsonFollow(rule: FollowRule & { json: string }): CompiledJsonFollowRule {
  const format = rule.format?.split('{}');
  return {
    path: compileJsonPath(rule.json),
    ...(format ? { format: { before: format[0]!, after: format.slice(1).join('{}') } } : {}),
    allow: (rule.allow ?? []).map((r) => new RegExp(r)),
    deny: (rule.deny ?? []).map((r) => new RegExp(r)),
  };
}

const cache = new WeakMap<Spider, CompiledRules>();

export function compileRules(spider: Spider): CompiledRules {
  let rules = cache.get(spider);
  if (!rules) {
    rules = {
      items: spider.items.filter((r) => !isJsonRule(r)).map(compileItem),
      follow: spider.follow.filter((r): r is FollowRule & { css: string } => r.css !== undefined).map(compileFollow),
      jsonItems: spider.items.filter(isJsonRule).map(compileJsonItem),
      jsonFollow: spider.follow.filter((r): r is FollowRule & { json: string } => r.json !== undefined).map(compileJsonFollow),
    };
    cache.set(spider, rules);
  }
  return rules;
}
