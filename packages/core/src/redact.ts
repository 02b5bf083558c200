/** Replaces the user-info of every URL in a string with `***`, so credentials never reach logs. */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/@:]*)(?::[^\s/@]*)?@/gi;

export function redactUrl(text: string): string {
  return text.replace(URL_CREDENTIALS, (_match, scheme: string) => `${scheme}***:***@`);
}

/** Deeply redacts credentials inside every string of a value; used on log records and status. */
export function redactDeep<T>(value: T): T {
  if (typeof value === 'string') return redactUrl(value) as T;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v)) as T;
  if (value && typeof value === 'object' && !(value instanceof Date) && !(value instanceof Buffer)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = redactDeep(v);
    return out as T;
  }
  return value;
}
