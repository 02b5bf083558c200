import http from 'node:http';

/** Hop-by-hop headers a proxy does not pass on (RFC 9110 7.6.1), and the proxy's own. */
export const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** The head the guard proxy sends the browser for a site's answer, or why it answers 502 instead. */
export type RelayedHead = { status: number; message: string | undefined; headers: http.OutgoingHttpHeaders } | { invalid: string };

/** RFC 9110 5.5 and 15: a reason phrase or field value is visible ASCII, space, tab and obs-text. */
const FIELD_TEXT = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Pure: what of a site's response head the guard proxy can pass on. Node's parser accepts any
 * three-digit status and a reason phrase with control characters (DEL included), and `writeHead`
 * throws on both, outside any catch: one answer took the renderer down. So:
 * - a status outside 100–599 is invalid (RFC 9110 15: a client treats it as a 5xx), and so is a
 *   1xx as the final answer (Node hands on interim ones itself, a 101 only to an upgrade): the
 *   browser gets a 502;
 * - a reason phrase that cannot be sent again is dropped (RFC 9110 15: it carries no meaning), the
 *   page is kept;
 * - a header Node would refuse to send is dropped; hop-by-hop headers are the proxy's own.
 */
export function relayedHead(statusCode: number | undefined, statusMessage: string | undefined, headers: http.IncomingHttpHeaders): RelayedHead {
  if (statusCode === undefined || !Number.isInteger(statusCode) || statusCode < 200 || statusCode > 599)
    return { invalid: `the site answered status ${statusCode ?? '(none)'} as its final answer, outside 200-599` };
  const message = statusMessage !== undefined && FIELD_TEXT.test(statusMessage) ? statusMessage : undefined;
  const back: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (HOP_BY_HOP.has(name) || value === undefined || !sendable(name, value)) continue;
    back[name] = value;
  }
  return { status: statusCode, message, headers: back };
}

/** Would Node send this header? (its own checks, so that writeHead cannot throw on it) */
function sendable(name: string, value: string | string[]): boolean {
  try {
    http.validateHeaderName(name);
    for (const v of Array.isArray(value) ? value : [value]) http.validateHeaderValue(name, v);
    return true;
  } catch {
    return false;
  }
}
