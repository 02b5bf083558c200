import { ConfigError } from '../errors.js';
import { formatPath } from './load.js';
import type { FieldRule, ItemRule, Spider } from './schema.js';

/** A problem with how a spider's items are identified: where it is (`items[1]`, `items[1].key`) and what is wrong. */
export interface IdentityProblem {
  path: Array<string | number>;
  message: string;
}

/** Field names that usually hold a value unique to each item: `id`, `sku`, `link`, `productId`, `page_url`. */
const ID_NAME = /^(id|uid|uuid|guid|sku|upc|isbn|ean|gtin|asin|mpn|slug|code|permalink|href|link|url)$/i;
const ID_SUFFIX = /(_id|Id|ID|_url|Url|URL|_link|Link)$/;

/** Pure: the field most likely to tell a rule's items apart, or undefined when none looks like it. */
export function suggestKeyField(rule: Pick<ItemRule, 'fields'>): string | undefined {
  const fields = Object.entries(rule.fields).filter(([, f]) => f.all !== true && f.type !== 'boolean');
  const rank = ([name, f]: [string, FieldRule]): number => {
    if (ID_NAME.test(name) || ID_SUFFIX.test(name)) return 0;
    if (f.absolute === true || f.attr === 'href') return 1;
    return 2;
  };
  const best = fields.map((entry) => ({ name: entry[0], rank: rank(entry) })).sort((a, b) => a.rank - b.rank)[0];
  return best && best.rank < 2 ? best.name : undefined;
}

function keyAdvice(rule: ItemRule): string {
  const field = suggestKeyField(rule);
  if (field !== undefined) return `name a field that tells them apart: "key": ${JSON.stringify(field)}`;
  const example = rule.eachJson !== undefined ? '"id": { "json": "id" } and "key": "id"' : '"link": { "css": "a", "attr": "href", "absolute": true } and "key": "link"';
  return `add a field that tells them apart and name it in "key" (for example ${example})`;
}

/**
 * Pure: a rule that makes several items per page (`each`, `eachJson`) but identifies them by the
 * page's URL (no `key`, or `key: "url"`). Identity is type plus key, so the file sink would keep one
 * item per page and MongoDB would upsert them all onto one document, while `written` counted each.
 */
export function itemIdentityProblems(spider: Pick<Spider, 'items'>): IdentityProblem[] {
  return spider.items.flatMap((rule, i): IdentityProblem[] => {
    const each = rule.each !== undefined ? 'each' : rule.eachJson !== undefined ? 'eachJson' : undefined;
    if (each === undefined || (rule.key !== undefined && rule.key !== 'url')) return [];
    const why = rule.key === undefined ? `without "key" every item of a page is identified by the page's URL` : `"url" is the page's URL, the same for every item of a page`;
    return [
      {
        path: rule.key === undefined ? ['items', i] : ['items', i, 'key'],
        message: `"${each}" makes one item per element, but ${why}, so the sinks would keep one of them; ${keyAdvice(rule)}`,
      },
    ];
  });
}

/** Refuses a spider whose items would overwrite one another, naming the file, each rule and a key to use (exit 2). */
export function assertItemIdentity(spider: Pick<Spider, 'items'>, file: string): void {
  const problems = itemIdentityProblems(spider);
  if (problems.length === 0) return;
  const issues = problems.map((p) => `${file}: ${formatPath(p.path)}: ${p.message}`);
  throw new ConfigError(`invalid spider:\n  ${issues.join('\n  ')}`, { file, issues });
}
