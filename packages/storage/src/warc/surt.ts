/**
 * The SURT key pywb looks a URL up by: python's `surt.surt(url)` (the Internet Archive's
 * WaybackURLKeyMaker, GoogleURLCanonicalizer then IAURLCanonicalizer), for the URLs the fleet
 * fetches (already WHATWG-normalised). warcio.js's own `getSurt` keeps a directory's trailing slash
 * and percent-escapes that python undoes, so pywb would not find about a third of real pages by its
 * keys (measured on the links of the 130 top-site pages); tested against python's surt on them.
 */

/** Bytes python's `quote` leaves alone in escapeOnce: alphanumerics, `_.-~`, and this list. */
const SAFE = new Set(Buffer.from('!"$&\'()*+,-./:;<=>?@[\\]^_`{|}~abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'));

function percentDecodeBytes(bytes: Buffer): Buffer {
  const out: number[] = [];
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b === 0x25 && i + 2 < bytes.length && isHex(bytes[i + 1]) && isHex(bytes[i + 2])) {
      out.push(Number.parseInt(String.fromCharCode(bytes[i + 1]!, bytes[i + 2]!), 16));
      i += 2;
    } else out.push(b);
  }
  return Buffer.from(out);
}

function isHex(b: number | undefined): boolean {
  return b !== undefined && ((b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66));
}

/** unescapeRepeatedly: percent-decoded until nothing changes. */
function unescapeRepeatedly(bytes: Buffer): Buffer {
  for (;;) {
    const decoded = percentDecodeBytes(bytes);
    if (decoded.equals(bytes)) return bytes;
    bytes = decoded;
  }
}

/** escapeOnce: every byte outside the safe set as %XX (upper-case hex, as python's quote). */
function escapeOnce(bytes: Buffer): string {
  let out = '';
  for (const b of bytes) out += SAFE.has(b) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  return out;
}

/** normalizePath: `.` dropped, `..` resolved, empty segments dropped but a trailing one. */
function normalizePath(path: Buffer): Buffer {
  if (path.length === 0) return Buffer.from('/');
  const segments = path.toString('latin1').split('/').slice(1);
  const kept: string[] = [];
  for (const segment of segments) {
    if (segment === '.') continue;
    if (segment === '..') {
      if (kept.length > 0) kept.pop();
      else kept.push(segment);
    } else kept.push(segment);
  }
  let out = '/';
  for (let i = 0; i < kept.length - 1; i++) if (kept[i]!.length > 0) out += `${kept[i]}/`;
  if (kept.length > 0) out += kept.at(-1);
  return Buffer.from(out, 'latin1');
}

const PATH_SESSION_IDS = [/^(.*\/)(\((?:[a-z]\([0-9a-z]{24}\))+\)\/)([^?]+\.aspx.*)$/i, /^(.*\/)(\([0-9a-z]{24}\)\/)([^?]+\.aspx.*)$/i];
const QUERY_SESSION_IDS = [
  /^(.*)(?:jsessionid=[0-9a-zA-Z]{32})(?:&(.*))?$/i,
  /^(.*)(?:phpsessid=[0-9a-zA-Z]{32})(?:&(.*))?$/i,
  /^(.*)(?:sid=[0-9a-zA-Z]{32})(?:&(.*))?$/i,
  /^(.*)(?:ASPSESSIONID[a-zA-Z]{8}=[a-zA-Z]{24})(?:&(.*))?$/i,
  /^(.*)(?:cfid=[^&]+&cftoken=[^&]+)(?:&(.*))?$/i,
];

function stripPathSessionId(path: string): string {
  for (const pattern of PATH_SESSION_IDS) {
    const m = pattern.exec(path);
    if (m) path = m[1]! + m[3]!;
  }
  return path;
}

function stripQuerySessionId(query: string): string {
  for (const pattern of QUERY_SESSION_IDS) {
    const m = pattern.exec(query);
    if (m) query = m[2] ? m[1]! + m[2] : m[1]!;
  }
  return query;
}

/** alphaReorderQuery: the arguments sorted as python sorts (name, value) tuples of bytes. */
function alphaReorderQuery(query: string): string {
  if (query.length <= 1) return query;
  const args = query.split('&').map((arg) => {
    const eq = arg.indexOf('=');
    return eq < 0 ? [arg] : [arg.slice(0, eq), arg.slice(eq + 1)];
  });
  const compare = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'latin1'), Buffer.from(b, 'latin1'));
  args.sort((a, b) => compare(a[0]!, b[0]!) || (a.length === 1 ? (b.length === 1 ? 0 : -1) : b.length === 1 ? 1 : compare(a[1]!, b[1]!)));
  return args.map((a) => a.join('=')).join('&');
}

/** `surt.surt(url)` for an http(s) URL. */
export function surtKey(url: string): string {
  const u = new URL(url);
  const host = u.hostname
    .replace(/\.\./g, '.')
    .replace(/^\.+|\.+$/g, '')
    .replace(/^www\d*\./, '');
  const hostKey = host.split('.').reverse().join(',') + (u.port ? `:${u.port}` : '');
  let path = escapeOnce(normalizePath(unescapeRepeatedly(Buffer.from(u.pathname, 'latin1')))).toLowerCase();
  path = stripPathSessionId(path);
  if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
  const rawQuery = u.search.slice(1);
  let query = rawQuery ? escapeOnce(unescapeRepeatedly(Buffer.from(rawQuery, 'latin1'))) : '';
  if (query) query = alphaReorderQuery(stripQuerySessionId(query).toLowerCase());
  return `${hostKey})${path}${query ? `?${query}` : ''}`;
}
