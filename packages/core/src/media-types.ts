/**
 * JSON responses, which the fetcher hands to the parse stage as it does HTML: `application/json`,
 * `text/json` and any `+json` type (`application/ld+json`, `application/vnd.api+json`, ...), with or
 * without parameters.
 */
const JSON_TYPES = /^\s*(application\/json|text\/json|[a-z0-9!#$&^_.-]+\/[a-z0-9!#$&^_.+-]*\+json)\s*(;|$)/i;

/** Pure: whether a Content-Type header names JSON. */
export function isJsonContentType(contentType: string | undefined): boolean {
  return contentType !== undefined && JSON_TYPES.test(contentType);
}
