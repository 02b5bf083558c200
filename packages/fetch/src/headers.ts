import { isSecretName } from '@crawlfleet/core';

/** Response headers as Node gives them: lower-case names, repeated ones as arrays. */
export type Headers = Record<string, string | string[] | undefined>;

/** The first value of a header, if present. */
export function headerValue(headers: Headers | undefined, name: string): string | undefined {
  const value = headers?.[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Response headers that carry a credential whatever their name says: a session, a login. */
const CREDENTIAL_HEADERS = new Set(['set-cookie', 'set-cookie2', 'cookie', 'authorization', 'proxy-authorization']);

/** Pure: does this header carry a credential (Set-Cookie, or a name like `x-auth-token`, `x-api-key`)? */
export function isCredentialHeader(name: string): boolean {
  return CREDENTIAL_HEADERS.has(name.toLowerCase()) || isSecretName(name);
}

/**
 * Pure: the response headers a code spider's `page.headers` holds, one string each (repeated ones
 * joined as RFC 9110 allows), without the credential headers (isCredentialHeader): they would travel
 * in the parse job, which Bull Board shows and Redis keeps, and a page's session has no business there.
 */
export function flatHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || isCredentialHeader(name)) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}
