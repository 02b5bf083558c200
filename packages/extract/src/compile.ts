import type { FieldRule, FollowRule, ItemRule, Spider } from '@crawlfleet/core';

/** A spider's rules with their regular expressions compiled once. */
export interface CompiledField extends FieldRule {
  name: string;
  pattern?: RegExp;
}

export interface CompiledItemRule {
  type: string;
  key: string;
  match?: RegExp;
  each?: string;
  fields: CompiledField[];
}

export interface CompiledFollowRule {
  css: string;
  attr: string;
  allow: RegExp[];
  deny: RegExp[];
}

export interface CompiledRules {
  items: CompiledItemRule[];
  follow: CompiledFollowRule[];
}

function compileItem(rule: ItemRule): CompiledItemRule {
  return {
    type: rule.type,
    key: rule.key ?? 'url',
    ...(rule.match !== undefined ? { match: new RegExp(rule.match) } : {}),
    ...(rule.each !== undefined ? { each: rule.each } : {}),
    fields: Object.entries(rule.fields).map(([name, f]) => ({ ...f, name, ...(f.regex !== undefined ? { pattern: new RegExp(f.regex) } : {}) })),
  };
}

function compileFollow(rule: FollowRule): CompiledFollowRule {
  return { css: rule.css, attr: rule.attr ?? 'href', allow: (rule.allow ?? []).map((r) => new RegExp(r)), deny: (rule.deny ?? []).map((r) => new RegExp(r)) };
}

const cache = new WeakMap<Spider, CompiledRules>();

export function compileRules(spider: Spider): CompiledRules {
  let rules = cache.get(spider);
  if (!rules) {
    rules = { items: spider.items.map(compileItem), follow: spider.follow.map(compileFollow) };
    cache.set(spider, rules);
  }
  return rules;
}
