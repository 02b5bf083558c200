import type { Spider } from '@crawlfleet/core';

export type ResponseVerdict =
  | { kind: 'ok' }
  | { kind: 'retry'; reason: string }
  | { kind: 'fail'; reason: string };

/**
 * Pure decision on a final HTTP response (after redirects): keep it, retry it, or give it up.
 * Block detection (issue #4) builds on this.
 */
export function classifyResponse(status: number, spider: Pick<Spider, 'retry'>): ResponseVerdict {
  if (status >= 200 && status < 300) return { kind: 'ok' };
  if (spider.retry.statusCodes.includes(status)) return { kind: 'retry', reason: `HTTP ${status}` };
  return { kind: 'fail', reason: `HTTP ${status}` };
}

const HTML_TYPES = /^(text\/html|application\/xhtml\+xml)\b/i;

/** Only HTML goes on to the parser; an absent content type is sniffed as HTML, as browsers do. */
export function isHtml(contentType: string | undefined, body: Buffer): boolean {
  if (contentType) return HTML_TYPES.test(contentType);
  return /^\s*<(!doctype html|html|head|body)/i.test(body.subarray(0, 512).toString('latin1'));
}
