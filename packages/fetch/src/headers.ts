/** Response headers as Node gives them: lower-case names, repeated ones as arrays. */
export type Headers = Record<string, string | string[] | undefined>;

/** The first value of a header, if present. */
export function headerValue(headers: Headers | undefined, name: string): string | undefined {
  const value = headers?.[name];
  return Array.isArray(value) ? value[0] : value;
}
