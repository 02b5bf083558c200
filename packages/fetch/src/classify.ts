import type { Spider } from '@crawlfleet/core';

export type ResponseVerdict =
  | { kind: 'ok' }
  | { kind: 'retry'; reason: string }
  | { kind: 'blocked'; reason: string }
  | { kind: 'fail'; reason: string };

export interface ResponseFacts {
  status: number;
  contentType: string | undefined;
  body: Buffer;
}

/** How much of a body the block patterns look at: block pages are short, real pages put text early. */
const PATTERN_WINDOW_BYTES = 256 * 1024;

/**
 * Pure: the visible text of the start of an HTML page, lower-cased. Scripts, styles and tags are
 * dropped, so a page that merely loads a reCAPTCHA widget does not read as a captcha wall.
 */
export function visibleText(body: Buffer): string {
  return body
    .subarray(0, PATTERN_WINDOW_BYTES)
    .toString('utf8')
    .replace(/<(script|style|noscript)\b[\s\S]*?<\/\1\s*>/gi, ' ')
    .replace(/<!--[\s\S]*?-->/g, ' ')
    .replace(/<[^>]*>/g, ' ')
    .replace(/&nbsp;/g, ' ')
    .replace(/\s+/g, ' ')
    .toLowerCase();
}

/**
 * Pure decision on a final HTTP response (after redirects): keep it, retry it, call it a block, or
 * give it up. A block is a 403 or 429, a 2xx page whose text matches one of `blockPatterns`, or a 2xx
 * body shorter than `blockMinBytes`. A block is retried through another proxy; a retry status
 * (`retry.statusCodes`) is retried as it is.
 */
export function classifyResponse(response: ResponseFacts, spider: Pick<Spider, 'retry' | 'blockPatterns' | 'blockMinBytes'>): ResponseVerdict {
  const { status, body } = response;
  if (status === 403 || status === 429) return { kind: 'blocked', reason: `blocked: HTTP ${status}` };
  if (status >= 200 && status < 300) {
    if (body.length < spider.blockMinBytes) return { kind: 'blocked', reason: `blocked: a ${body.length}-byte body (blockMinBytes ${spider.blockMinBytes})` };
    if (spider.blockPatterns.length > 0 && isHtml(response.contentType, body)) {
      const text = visibleText(body);
      const hit = spider.blockPatterns.find((p) => text.includes(p.toLowerCase()));
      if (hit) return { kind: 'blocked', reason: `blocked: the page says ${JSON.stringify(hit)}` };
    }
    return { kind: 'ok' };
  }
  if (spider.retry.statusCodes.includes(status)) return { kind: 'retry', reason: `HTTP ${status}` };
  return { kind: 'fail', reason: `HTTP ${status}` };
}

const HTML_TYPES = /^(text\/html|application\/xhtml\+xml)\b/i;

/** Only HTML goes on to the parser; an absent content type is sniffed as HTML, as browsers do. */
export function isHtml(contentType: string | undefined, body: Buffer): boolean {
  if (contentType) return HTML_TYPES.test(contentType);
  return /^\s*<(!doctype html|html|head|body)/i.test(body.subarray(0, 512).toString('latin1'));
}
