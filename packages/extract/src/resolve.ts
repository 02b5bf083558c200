import type { FieldRule } from '@crawlfleet/core';
import { canonicalizeUrl } from '@crawlfleet/frontier';
import { applyRegex, convertValue, type ScalarValue } from './convert.js';

/** http(s) links in canonical form, so they match the frontier's URLs; other schemes resolved as they are. */
export function resolveUrl(value: string, base: string): string | undefined {
  const canonical = canonicalizeUrl(value, base);
  if (canonical !== undefined) return canonical;
  try {
    return new URL(value, base).href;
  } catch {
    return undefined;
  }
}

/** Pure: a field's text as its value: the regex's capture, resolved as a URL when `absolute`, converted to its type. Shared by css and json fields. */
export function textFieldValue(raw: string, field: { pattern?: RegExp | undefined; absolute?: boolean | undefined; type?: FieldRule['type'] }, base: string): ScalarValue {
  let value = applyRegex(raw.trim(), field.pattern);
  if (value === undefined) return null;
  if (field.absolute) {
    const abs = resolveUrl(value, base);
    if (abs === undefined) return null;
    value = abs;
  }
  return convertValue(value, field.type);
}

/** A required field's value that counts as missing: null, empty text or an empty list. */
export function isMissing(v: unknown): boolean {
  return v === null || v === '' || (Array.isArray(v) && v.length === 0);
}
