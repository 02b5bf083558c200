import type { LoadedSpiderModule, Spider } from '@crawlfleet/core';
import { extractResponse, runPageHooks, type ExtractedItem } from '@crawlfleet/extract';
import { classifyResponse, decodePage, fetchPage, flatHeaders, isParseable, runRequestHook, withSetCookiesSent, type Lookup, type ResponseVerdict } from '@crawlfleet/fetch';

export interface ShellOptions {
  userAgent: string;
  /** resolves names in place of DNS (HOST_RESOLVE); the spider's address policy vets the answers */
  lookup?: Lookup;
  /** a code spider's module: its request, parse and item hooks run as in the fleet */
  module?: LoadedSpiderModule;
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
  /** whether the page went through extraction (an `ok` verdict and an HTML or JSON body) */
  parsed: boolean;
  items: ExtractedItem[];
  links: string[];
  /** items dropped (a missing required field, a code spider's item hook or schema) */
  invalid: number;
  /** why each was dropped */
  invalidReasons: string[];
}

/**
 * The fetch and parse of one page as the fleet would run them, without Redis and without storing
 * anything: one GET under the spider's limits and SSRF address policy (robots.txt, politeness and
 * proxies are not consulted), the fleet's verdict on the response, then, for an `ok` HTML page, the
 * browser-like decoding and the spider's rules. Network errors are thrown (RetryableError,
 * NonRetryableError, ForbiddenAddressError).
 */
export async function shellPage(url: string, spider: Spider, options: ShellOptions): Promise<ShellPage> {
  const crawlId = 'shell';
  // A spider that keeps sessions: the hook is told one, fresh (no cookie yet), which lives for this one request.
  const session = spider.sessions.enabled ? { session: { id: 'shell', userAgent: options.userAgent, cookies: {} } } : {};
  const request = withSetCookiesSent(await runRequestHook(options.module, url, { crawlId, spider, depth: 0, meta: {}, ...session }));
  const page = await fetchPage(url, spider, {
    userAgent: options.userAgent,
    ...(options.lookup ? { lookup: options.lookup } : {}),
    // A request hook's headers (an API key, a cookie) never follow a redirect to another origin, as in the fleet.
    ...(request ? { request, followRedirect: (from: URL, to: URL) => from.origin === to.origin } : {}),
  });
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
    invalidReasons: [],
  };
  if (verdict.kind !== 'ok' || !isParseable(page.contentType, page.body)) return result;
  const text = decodePage(page.body, page.contentType);
  const fetchedAt = new Date().toISOString();
  const contentType = page.contentType ?? '';
  const rules = extractResponse({ body: text, contentType, url: page.url }, spider, { crawlId, fetchedAt });
  const hooked = await runPageHooks(
    options.module,
    { url: page.url, requestedUrl: url, status: page.status, headers: flatHeaders(page.headers), contentType, text, doc: rules.doc, crawlId, fetchedAt, depth: 0, meta: {} },
    spider,
    rules,
  );
  return { ...result, parsed: true, items: hooked.items, links: hooked.links.map((l) => l.url), invalid: hooked.invalid, invalidReasons: hooked.invalidReasons };
}
