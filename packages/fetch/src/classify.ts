import { isJsonContentType, type Spider } from '@crawlfleet/core';
import { BLOCK_SCAN_CHARS, detectBlock } from './block-detect.js';
import { decodeWith, sniffEncoding } from './charset.js';
import { headerValue, type Headers } from './headers.js';
import { redirectTarget } from './redirect.js';

export type ResponseVerdict =
  | { kind: 'ok' }
  | { kind: 'retry'; reason: string }
  | { kind: 'blocked'; reason: string; signal: string }
  | { kind: 'redirect'; location: string }
  | { kind: 'fail'; reason: string };

export interface ResponseFacts {
  status: number;
  contentType: string | undefined;
  body: Buffer;
  /** the URL that answered (after any redirect followed inline) */
  url?: string;
  headers?: Headers;
}

export type ClassifySettings = Pick<Spider, 'retry' | 'blockPatterns' | 'blockMinBytes' | 'blockPageMaxChars' | 'blockMarkers'>;

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/**
 * Pure decision on a final HTTP response: keep it, follow its redirect as a new URL, retry it, call
 * it a block, or give it up.
 * - A block is a 403 or 429, a 2xx body shorter than `blockMinBytes`, or an HTML page that
 *   detectBlock recognises, whatever its status (vendors use 200, 403, 405, 429 and 503). A block is
 *   retried through another proxy; a retry status (`retry.statusCodes`) is retried as it is.
 * - A redirect reaches here only when it leaves the page's origin (same-origin ones are followed
 *   inline): its target goes through the frontier like a link.
 */
export function classifyResponse(response: ResponseFacts, spider: ClassifySettings): ResponseVerdict {
  const { status, body } = response;
  if (status === 403 || status === 429) return { kind: 'blocked', signal: `http-${status}`, reason: `blocked: HTTP ${status}` };
  const ok = status >= 200 && status < 300;
  if (ok && body.length < spider.blockMinBytes) return { kind: 'blocked', signal: 'empty', reason: `blocked: a ${body.length}-byte body (blockMinBytes ${spider.blockMinBytes})` };
  const retry = spider.retry.statusCodes.includes(status);
  const redirect = REDIRECT_STATUSES.has(status);
  // Vendors serve block pages under many statuses (AWS WAF and Distil use 405, a challenge 503).
  if (!redirect && isHtml(response.contentType, body)) {
    const verdict = detectBlock({ html: pageStart(body, response.contentType), ...(response.headers ? { headers: response.headers } : {}) }, spider);
    if (verdict.blocked) return { kind: 'blocked', signal: verdict.signal, reason: verdict.reason };
  }
  if (ok) return { kind: 'ok' };
  if (retry) return { kind: 'retry', reason: `HTTP ${status}` };
  if (redirect && response.url) {
    const target = redirectTarget(headerValue(response.headers, 'location'), response.url);
    if (target) return { kind: 'redirect', location: target.href };
  }
  return { kind: 'fail', reason: `HTTP ${status}` };
}

/**
 * The decoded start of a page, as much as block detection reads (a byte never decodes to more than
 * one character), decoded as the parser will decode the whole.
 */
function pageStart(body: Buffer, contentType: string | undefined): string {
  const { encoding } = sniffEncoding(body, contentType);
  return decodeWith(body.length > BLOCK_SCAN_CHARS ? body.subarray(0, BLOCK_SCAN_CHARS) : body, encoding);
}

const HTML_TYPES = /^(text\/html|application\/xhtml\+xml)\b/i;

/** HTML, declared or (with no content type) sniffed as browsers do. */
export function isHtml(contentType: string | undefined, body: Buffer): boolean {
  if (contentType) return HTML_TYPES.test(contentType);
  const start = body.subarray(0, 512);
  return /^\s*<(!doctype html|html|head|body)/i.test(decodeWith(start, sniffEncoding(start, undefined).encoding));
}

/** What goes on to the parse stage: HTML (declared or sniffed) and JSON (declared); anything else ends at the fetch. */
export function isParseable(contentType: string | undefined, body: Buffer): boolean {
  return isHtml(contentType, body) || isJsonContentType(contentType);
}
