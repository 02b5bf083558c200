import type { FieldRule } from '@crawlfleet/core';
import type { JsonValue } from './json-path.js';

/** What convertValue gives: a field's value from text. */
export type ScalarValue = string | number | boolean | null;
/** A field's value: a scalar, or (a json field with no type or regex) any JSON value as the page had it. */
export type FieldValue = ScalarValue | JsonValue;

const NUMBER_WITH_GROUPING = /^[-+]?\d{1,3}(,\d{3})+(\.\d+)?$/;

/** Pure: a raw string as the field's type; null when it does not convert. */
export function convertValue(raw: string, type: FieldRule['type']): ScalarValue {
  const value = raw.trim();
  switch (type ?? 'string') {
    case 'string':
      return value;
    case 'number': {
      const n = Number(NUMBER_WITH_GROUPING.test(value) ? value.replace(/,/g, '') : value);
      return value === '' || Number.isNaN(n) ? null : n;
    }
    case 'integer': {
      const n = Number(NUMBER_WITH_GROUPING.test(value) ? value.replace(/,/g, '') : value);
      return value === '' || !Number.isFinite(n) ? null : Math.trunc(n);
    }
    case 'boolean':
      if (value === '') return null;
      return !/^(false|0|no|off|n)$/i.test(value);
    default:
      return null;
  }
}

/** Pure: the first capture group of `pattern` in `value` (the whole match when it has no group). */
export function applyRegex(value: string, pattern: RegExp | undefined): string | undefined {
  if (!pattern) return value;
  const m = pattern.exec(value);
  if (!m) return undefined;
  return m[1] ?? m[0];
}
