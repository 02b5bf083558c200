/** Response headers as Node gives them: lower-case names, repeated ones as arrays. */
export type Headers = Record<string, string | string[] | undefined>;

/** The first value of a header, if present. */
export function headerValue(headers: Headers | undefined, name: string): string | undefined {
  const value = headers?.[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Pure: headers as one string each (repeated ones joined as RFC 9110 allows; Set-Cookie lines by newline). */
export function flatHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    out[name] = Array.isArray(value) ? value.join(name === 'set-cookie' ? '\n' : ', ') : value;
  }
  return out;
}
