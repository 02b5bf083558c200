import { canonicalizeUrl } from '@crawlfleet/frontier';

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

/** A required field's value that counts as missing: null, empty text or an empty list. */
export function isMissing(v: unknown): boolean {
  return v === null || v === '' || (Array.isArray(v) && v.length === 0);
}
