import { NonRetryableError } from '@crawlfleet/core';
import type { FetchResult } from '@crawlfleet/fetch';
import type { CDPSession, Page, Request } from 'playwright-core';

/**
 * Pure: whether a plain request follows hop `hop` of a chain (0: the first redirect), from `from`
 * to `to`: `redirect` where it would not follow inline, `too-many` past `maxRedirects`.
 */
export function hopStop(hop: number, from: string, to: string, followRedirect: (from: URL, to: URL) => boolean, maxRedirects: number): 'redirect' | 'too-many' | undefined {
  if (!followRedirect(new URL(from), new URL(to))) return 'redirect';
  if (hop + 1 > maxRedirects) return 'too-many';
  return undefined;
}

/**
 * Pure: where a chain of redirects (its URLs, the requested one first) stops under a plain
 * request's rules: at the first hop it would not follow inline (`redirect`, the hop's index), or
 * past `maxRedirects` (`too-many`); undefined when the whole chain is one a plain request follows.
 */
export function redirectStop(chain: readonly string[], followRedirect: (from: URL, to: URL) => boolean, maxRedirects: number): { kind: 'redirect'; hop: number } | { kind: 'too-many' } | undefined {
  for (let hop = 0; hop + 1 < chain.length; hop++) {
    const stop = hopStop(hop, chain[hop]!, chain[hop + 1]!, followRedirect, maxRedirects);
    if (stop === 'redirect') return { kind: 'redirect', hop };
    if (stop === 'too-many') return { kind: 'too-many' };
  }
  return undefined;
}

/** Where a page's chain of redirects left a plain request's rules: the hop that answered 3xx, or too many hops. */
export type RedirectVerdict = { kind: 'redirect'; url: string; status: number; location: string; hop: number } | { kind: 'too-many'; url: string };

/**
 * The answer a plain request would have given where the chain stopped: the 3xx of that hop, whose
 * target the fetcher then takes as a new URL of the crawl (scope, robots.txt, its host's turn,
 * limits.maxRedirects), as it does a plain redirect; past the budget, ERR_TOO_MANY_REDIRECTS.
 */
export function redirectAnswer(verdict: RedirectVerdict, maxRedirects: number, started: number): FetchResult {
  if (verdict.kind === 'too-many') throw new NonRetryableError('ERR_TOO_MANY_REDIRECTS', `more than ${maxRedirects} redirects (limits.maxRedirects) in the browser`, { url: verdict.url });
  return {
    url: verdict.url,
    status: verdict.status,
    headers: { location: verdict.location },
    contentType: undefined,
    body: Buffer.alloc(0),
    elapsedMs: performance.now() - started,
    redirects: verdict.hop,
  };
}

/**
 * The chain the browser followed, judged after the load (redirectStop): the fallback where the
 * gate below could not be set (a browser without CDP).
 */
export async function verdictOfChain(last: Request | undefined, followRedirect: (from: URL, to: URL) => boolean, maxRedirects: number): Promise<RedirectVerdict | undefined> {
  const requests: Request[] = [];
  for (let r: Request | null | undefined = last; r; r = r.redirectedFrom()) requests.unshift(r);
  const stop = redirectStop(
    requests.map((r) => r.url()),
    followRedirect,
    maxRedirects,
  );
  if (!stop) return undefined;
  if (stop.kind === 'too-many') return { kind: 'too-many', url: requests[0]!.url() };
  const from = requests[stop.hop]!;
  const response = await from.response().catch(() => null);
  return { kind: 'redirect', url: from.url(), status: response?.status() ?? 302, location: requests[stop.hop + 1]!.url(), hop: stop.hop };
}

export interface RedirectGate {
  /** where the page's navigation was stopped, if it was */
  verdict(): RedirectVerdict | undefined;
  close(): void;
}

interface PausedResponse {
  requestId: string;
  frameId: string;
  request: { url: string };
  responseStatusCode?: number;
  responseHeaders?: { name: string; value: string }[];
}

/** The statuses Chromium follows (net::HttpResponseHeaders::IsRedirectResponseCode); a 300 or 304 it renders. */
const FOLLOWED = new Set([301, 302, 303, 307, 308]);

/**
 * Holds the page's own navigation at each redirect until the hop is judged by a plain request's
 * rules, so the browser never requests a target the rules refuse (another origin, a path robots.txt
 * disallows, one hop past limits.maxRedirects). Playwright routes only a chain's first request; the
 * hops are held where Chromium has received the 3xx and not yet followed it (CDP's Fetch domain at
 * the response stage, documents only). A refused hop fails the navigation; `verdict` says why.
 * Undefined where the browser has no CDP: the chain is then judged after the load (verdictOfChain).
 *
 * Every redirect of a main-frame document is a hop of the page's own navigation: any later
 * navigation is refused before it reaches the network (pageRouter). Each hop is judged from the URL
 * Chromium requested to its Location, in the order they come, so no URL is compared across two
 * parsers (Chromium's and WHATWG's differ on percent-encoding).
 */
export async function gateRedirects(page: Page, url: string, followRedirect: (from: URL, to: URL) => boolean, maxRedirects: number): Promise<RedirectGate | undefined> {
  let session: CDPSession;
  try {
    session = await page.context().newCDPSession(page);
  } catch {
    return undefined;
  }
  let hops = 0;
  let verdict: RedirectVerdict | undefined;
  let mainFrame: string | undefined;
  const judge = (event: PausedResponse): 'continue' | 'stop' => {
    const status = event.responseStatusCode;
    const location = event.responseHeaders?.find((h) => h.name.toLowerCase() === 'location')?.value;
    if (verdict || event.frameId !== mainFrame || status === undefined || !FOLLOWED.has(status) || !location) return 'continue';
    let target: string;
    try {
      target = new URL(location, event.request.url).href;
    } catch {
      return 'continue'; // a Location that is no URL: Chromium fails the navigation itself (ERR_INVALID_REDIRECT)
    }
    const stop = hopStop(hops, event.request.url, target, followRedirect, maxRedirects);
    if (stop === undefined) {
      hops++;
      return 'continue';
    }
    verdict = stop === 'too-many' ? { kind: 'too-many', url } : { kind: 'redirect', url: event.request.url, status, location: target, hop: hops };
    return 'stop';
  };
  session.on('Fetch.requestPaused', (event: PausedResponse) => {
    const requestId = event.requestId;
    let decision: 'continue' | 'stop';
    try {
      decision = judge(event);
    } catch {
      decision = 'continue'; // a held response must be answered, or the page waits for it until its deadline
    }
    const answer = decision === 'stop' ? session.send('Fetch.failRequest', { requestId, errorReason: 'BlockedByClient' }) : session.send('Fetch.continueRequest', { requestId });
    // The page may close (its deadline) while a response is held: nothing is left to answer then.
    answer.catch(() => undefined);
  });
  // Not awaited: a page whose script spins for ever answers no detach, and closing the page ends the session anyway.
  const close = () => void session.detach().catch(() => undefined);
  try {
    mainFrame = (await session.send('Page.getFrameTree')).frameTree.frame.id;
    await session.send('Fetch.enable', { patterns: [{ urlPattern: '*', resourceType: 'Document', requestStage: 'Response' }] });
  } catch {
    close();
    return undefined;
  }
  return { verdict: () => verdict, close };
}
