import type { Spider } from '@crawlfleet/core';
import { extractPage, type ExtractedItem } from '@crawlfleet/extract';
import { classifyResponse, decodeHtml, fetchPage, isHtml, type Lookup, type ResponseVerdict } from '@crawlfleet/fetch';

export interface ShellOptions {
  userAgent: string;
  /** resolves names in place of DNS (HOST_RESOLVE); the spider's address policy vets the answers */
  lookup?: Lookup;
}

/** What `crawlfleet shell` shows of one page. */
export interface ShellPage {
  url: string;
  /** the URL after redirects */
  finalUrl: string;
  status: number;
  contentType: string | null;
  bytes: number;
  ms: number;
  /** the fleet's verdict on the response: only an `ok` HTML page is parsed */
  verdict: ResponseVerdict;
  /** whether the page went through extraction (an `ok` verdict and an HTML body) */
  parsed: boolean;
  items: ExtractedItem[];
  links: string[];
  /** items dropped for a missing required field */
  invalid: number;
}

/**
 * The fetch and parse of one page as the fleet would run them, without Redis and without storing
 * anything: one GET under the spider's limits and SSRF address policy (robots.txt, politeness and
 * proxies are not consulted), the fleet's verdict on the response, then, for an `ok` HTML page, the
 * browser-like decoding and the spider's rules. Network errors are thrown (RetryableError,
 * NonRetryableError, ForbiddenAddressError).
 */
export async function shellPage(url: string, spider: Spider, options: ShellOptions): Promise<ShellPage> {
  const page = await fetchPage(url, spider, { userAgent: options.userAgent, ...(options.lookup ? { lookup: options.lookup } : {}) });
  const verdict = classifyResponse(page, spider);
  const result: ShellPage = {
    url,
    finalUrl: page.url,
    status: page.status,
    contentType: page.contentType ?? null,
    bytes: page.body.length,
    ms: Math.round(page.elapsedMs),
    verdict,
    parsed: false,
    items: [],
    links: [],
    invalid: 0,
  };
  if (verdict.kind !== 'ok' || !isHtml(page.contentType, page.body)) return result;
  const html = decodeHtml(page.body, page.contentType);
  const extraction = extractPage(html, page.url, spider, { crawlId: 'shell', fetchedAt: new Date().toISOString() });
  return { ...result, parsed: true, items: extraction.items, links: extraction.links, invalid: extraction.invalid };
}
