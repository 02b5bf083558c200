/**
 * Credentials in URLs (Redis, MongoDB, proxies) must never reach logs, status or Redis: the
 * user-info, and query parameters named like a secret (`?password=`, `?access_token=`, `?key=`).
 *
 * Users paste passwords unencoded (`redis://:p@ss/w:rd@host`), so the user-info is not cut where a
 * URL parser cuts it (the first `@`, or the first `/`): it ends at the LAST `@` of the URL. That is
 * taken as user-info when the standard authority (up to the first `/`, `?` or `#`) holds an `@`, or
 * is not a host list at all (`user:pa` of `user:pa/ss@host`: a port is digits). A page URL such as
 * `https://medium.com/@user` has a plain host before its first `/`, so it is left alone.
 */

/** `host`, `host:port`, `[v6]:port`, comma-separated (MongoDB's seed lists). */
const HOST_LIST = /^(?:\[[^\]\s]*\]|[^\s:,[\]@]+)(?::\d+)?(?:,(?:\[[^\]\s]*\]|[^\s:,[\]@]+)(?::\d+)?)*$/;

/**
 * The start of a URL: a scheme and `://`, not preceded by a scheme character (so that a long run of
 * letters is scanned once, not once per letter).
 */
const SCHEME = /(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*:\/\//gi;
/** Where a URL written in text ends: whitespace, a quote or an angle bracket. */
const URL_END = /[\s"'<>`]/;

export interface UserInfoSplit {
  /** the user-info as written (without its closing `@`), or undefined when the URL has none */
  userInfo: string | undefined;
  /** what follows the user-info: the host list, path, query */
  rest: string;
}

/** Pure: splits the text after `scheme://` into user-info and the rest, by the rules above. */
export function splitUserInfo(afterScheme: string): UserInfoSplit {
  const lastAt = afterScheme.lastIndexOf('@');
  if (lastAt < 0) return { userInfo: undefined, rest: afterScheme };
  const authorityEnd = afterScheme.search(/[/?#]/);
  const authority = authorityEnd < 0 ? afterScheme : afterScheme.slice(0, authorityEnd);
  if (authority === '') return { userInfo: undefined, rest: afterScheme }; // file:///a/@b
  const hasUserInfo = authority.includes('@') || !HOST_LIST.test(authority);
  if (!hasUserInfo) return { userInfo: undefined, rest: afterScheme };
  return { userInfo: afterScheme.slice(0, lastAt), rest: afterScheme.slice(lastAt + 1) };
}

/** Parts of a name that make it a secret's: `client_secret`, `X-Amz-Security-Token`, `tlsCertificateKeyFilePassword`. */
const SECRET_PART = /password|passwd|passphrase|secret|token|apikey|accesskey|privatekey|credential|signature|sessionid|authorization/;
/** Names that are a secret's only as a whole (`key`, but not `keyword` or `sort_key`). */
const SECRET_NAME = new Set(['pass', 'pwd', 'pw', 'key', 'sig', 'auth', 'session', 'sid', 'jwt', 'authmechanismproperties']);

/**
 * Pure: is this the name of a credential (a URL's query parameter, a header)? Case, `-`, `_` and `.`
 * aside: `api_key`, `API-KEY` and `apikey` are one name.
 */
export function isSecretName(name: string): boolean {
  let decoded = name;
  try {
    decoded = decodeURIComponent(name);
  } catch {
    // a `%` that starts no escape: the name as written
  }
  const bare = decoded.toLowerCase().replace(/[-_.\s]/g, '');
  return SECRET_NAME.has(bare) || SECRET_PART.test(bare);
}

/** Punctuation that ends a sentence after a URL in text (`...?password=x: WRONGPASS`), kept outside the mask. */
const TRAILING_PUNCTUATION = /[.,:;!?)\]}]+$/;

/** Pure: the URL text (after its scheme) with the value of every secret-named query parameter masked as `***`. */
function redactQuery(text: string): string {
  const start = text.indexOf('?');
  if (start < 0) return text;
  const hash = text.indexOf('#', start);
  const end = hash < 0 ? text.length : hash;
  const query = text.slice(start + 1, end).replace(/(^|[&;])([^&;=]+)=([^&;]*)/g, (all, separator: string, name: string, value: string) => {
    const tail = TRAILING_PUNCTUATION.exec(value)?.[0] ?? '';
    if (value.length === tail.length || !isSecretName(name)) return all;
    return `${separator}${name}=***${tail}`;
  });
  return `${text.slice(0, start + 1)}${query}${text.slice(end)}`;
}

/**
 * Replaces the user-info of every URL in a string with `***:***`, and the value of its query
 * parameters named like a secret (isSecretName) with `***`.
 */
export function redactUrl(text: string): string {
  const starts = [...text.matchAll(SCHEME)];
  if (starts.length === 0) return text;
  let out = text.slice(0, starts[0]!.index);
  starts.forEach((m, i) => {
    const bodyStart = m.index + m[0].length;
    const segmentEnd = i + 1 < starts.length ? starts[i + 1]!.index : text.length;
    const segment = text.slice(bodyStart, segmentEnd);
    const end = segment.search(URL_END);
    const afterScheme = end < 0 ? segment : segment.slice(0, end);
    const { userInfo, rest } = splitUserInfo(afterScheme);
    out += userInfo === undefined ? m[0] + redactQuery(afterScheme) : `${m[0]}***:***@${redactQuery(rest)}`;
    out += end < 0 ? '' : segment.slice(end);
  });
  return out;
}

/** A user name or password as it must appear in a URL: percent-encoded once, whatever the user wrote. */
function encodeComponent(part: string): string {
  // Text that holds no raw delimiter and decodes cleanly was written encoded (`p%40ss`).
  if (!/[@:/?#[\]\s]/.test(part)) {
    try {
      return encodeURIComponent(decodeURIComponent(part));
    } catch {
      // a `%` that starts no escape: the password is raw
    }
  }
  return encodeURIComponent(part);
}

/**
 * Pure: the URL with its user-info percent-encoded, so that a raw `redis://:p@ss/w:rd@host` reaches
 * ioredis, the MongoDB driver or hpagent as `redis://:p%40ss%2Fw%3Ard@host`. The user name ends at the
 * first `:` of the user-info; everything after it is the password. Text that is not a URL is returned
 * as it is.
 */
export function encodeUrlCredentials(url: string): string {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)(.*)$/is.exec(url.trim());
  if (!match) return url;
  const { userInfo, rest } = splitUserInfo(match[2]!);
  if (userInfo === undefined) return url.trim();
  const colon = userInfo.indexOf(':');
  const user = colon < 0 ? userInfo : userInfo.slice(0, colon);
  const password = colon < 0 ? undefined : userInfo.slice(colon + 1);
  return `${match[1]}${encodeComponent(user)}${password === undefined ? '' : `:${encodeComponent(password)}`}@${rest}`;
}

/** Pure: the URL without its user-info (for storing or showing where it may be read by anyone). */
export function stripUrlCredentials(url: string): { url: string; hadCredentials: boolean } {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)(.*)$/is.exec(url.trim());
  if (!match) return { url, hadCredentials: false };
  const { userInfo, rest } = splitUserInfo(match[2]!);
  return { url: `${match[1]}${rest}`, hadCredentials: userInfo !== undefined };
}

/**
 * Deeply redacts credentials inside every string of a value; used on log records and status.
 * Errors keep their name, message, code, stack and cause (redacted); a cycle becomes '[Circular]'.
 */
export function redactDeep<T>(value: T): T {
  return redactValue(value, new Set()) as T;
}

function redactValue(value: unknown, ancestors: Set<object>): unknown {
  if (typeof value === 'string') return redactUrl(value);
  if (!value || typeof value !== 'object' || value instanceof Date || value instanceof Uint8Array) return value;
  // Only the objects on the path from the root count: a value shared by two branches is no cycle.
  if (ancestors.has(value)) return '[Circular]';
  ancestors.add(value);
  try {
    if (value instanceof Error) return redactError(value, ancestors);
    if (Array.isArray(value)) return value.map((v) => redactValue(v, ancestors));
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = redactValue(v, ancestors);
    return out;
  } finally {
    ancestors.delete(value);
  }
}

function redactError(err: Error, ancestors: Set<object>): Record<string, unknown> {
  const { code, cause } = err as Error & { code?: unknown; cause?: unknown };
  return {
    name: err.name,
    message: redactUrl(err.message),
    ...(code !== undefined ? { code: redactValue(code, ancestors) } : {}),
    ...(err.stack !== undefined ? { stack: redactUrl(err.stack) } : {}),
    ...(cause !== undefined ? { cause: redactValue(cause, ancestors) } : {}),
  };
}
