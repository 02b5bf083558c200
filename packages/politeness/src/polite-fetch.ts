import { parseRetryAfter, type Keys, type Logger, type Spider, type RedisClient } from '@crawlfleet/core';
import { classifyResponse, fetchPage, headerValue, isInlineRedirect, type FetchResult, type HttpRequestShape, type Lookup, type ResponseVerdict } from '@crawlfleet/fetch';
import { hostPolicy, jitterFactor, nextThrottleDelay } from './host-policy.js';
import { Limiter, type ProxyOutcome } from './limiter.js';
import { orderProxies } from './proxy-health.js';
import type { ProxyEntry } from './proxy-list.js';
import type { ProxyPool } from './proxy-pool.js';
import { ROBOTS_FETCH_MAX_BYTES, type RobotsCache, type RobotsFetch, type RobotsRules } from './robots.js';

export interface PoliteFetchInput {
  url: string;
  spider: Spider;
  /** names the host lease: the job id */
  leaseId: string;
  deferrals: number;
  /** proxies this URL was blocked through already */
  avoidProxies?: readonly string[];
  /** redirects that led to this URL: they count against limits.maxRedirects */
  redirects?: number;
  userAgent: string;
  /** the crawl: its deferred requests queue in a line of their own (acquireHost-2.lua, takeProxy-v.lua) */
  crawlId?: string;
  /** what a code spider's request hook asked for (never applied to robots.txt) */
  request?: HttpRequestShape;
  /** keep the exchange as on the wire (the crawl writes WARC) */
  keepWire?: boolean;
  /**
   * loads the page in place of a plain request (a browser: the render stage), under the same
   * robots.txt, host slot and proxy; robots.txt itself is always a plain request
   */
  load?: PageLoader;
  /** aborted when the job's deadline has passed: a page loader stops and lets go of its page */
  signal?: AbortSignal;
}

/** Loads a page some other way than one HTTP request (a browser), as a fetch would answer it. */
export type PageLoader = (url: string, options: PageLoadOptions) => Promise<FetchResult>;

export interface PageLoadOptions {
  userAgent: string;
  timeoutMs: number;
  signal?: AbortSignal;
  /** the redirects a plain request would follow inline (same origin, allowed by robots.txt); the first other one ends the load as a 3xx */
  followRedirect?: (from: URL, to: URL) => boolean;
  /** redirects left of limits.maxRedirects for this chain */
  maxRedirects?: number;
}

/**
 * What a fetch learnt of its host, for the frontier's schedule of the host's next turns: its
 * concurrency, the delay between starts it was held to, when this request started (Redis's clock,
 * ms) and a Retry-After hold (until, ms).
 */
export interface HostTurnReport {
  concurrency: number;
  delayMs: number;
  startedAt: number;
  holdUntil?: number;
}

export type PoliteFetchOutcome =
  | { kind: 'wait'; waitMs: number; reason: string }
  | { kind: 'disallowed' }
  | { kind: 'robots-unavailable'; reason: string }
  | { kind: 'response'; page: FetchResult; verdict: ResponseVerdict; proxy: ProxyEntry | undefined; retryAfterMs: number | undefined; host: HostTurnReport }
  | { kind: 'error'; error: unknown; proxy: ProxyEntry | undefined; proxyFault: boolean; host: HostTurnReport };

/** How long a job waits when every proxy is banned: about one probe round. */
const NO_PROXY_WAIT_MS = 2000;
/** When the first probe of a banned proxy comes. */
export const FIRST_PROBE_AFTER_MS = 2000;

/**
 * Pure: did the proxy itself fail (refused, unreachable, timed out before the tunnel opened, refused
 * our credentials)? Other errors (a tunnel the target reset, a slow page) say nothing against it.
 */
export function isProxyFault(err: unknown): boolean {
  for (let e = err as { code?: string; message?: string; cause?: unknown } | undefined, i = 0; e && i < 5; e = e.cause as typeof e, i++) {
    if (e.code === 'ECONNREFUSED' || e.code === 'EHOSTUNREACH' || e.code === 'ENETUNREACH') return true;
    if (/Proxy timeout|Bad response: 407/.test(e.message ?? '')) return true;
  }
  return false;
}

/**
 * One fetch, the polite way: robots.txt first (fetched once per host for the fleet), then a
 * fleet-wide slot for the host and a proxy's request (or how long to wait for one), then the
 * request, and then what was learnt goes back to Redis: the host's latency and AutoThrottle delay,
 * a Retry-After hold, the proxy's success, failure or block.
 */
export class PoliteFetcher {
  private readonly limiter: Limiter;

  constructor(
    redis: RedisClient,
    keys: Keys,
    private readonly pool: ProxyPool,
    private readonly robots: RobotsCache,
    private readonly log: Logger,
    /** resolves names in place of DNS (HOST_RESOLVE); each spider's address policy vets the answers */
    private readonly lookup?: Lookup,
  ) {
    this.limiter = new Limiter(redis, keys);
  }

  async fetch(input: PoliteFetchInput): Promise<PoliteFetchOutcome> {
    const { spider } = input;
    const url = new URL(input.url);
    let crawlDelayMs: number | undefined;
    let robotsOrigin: string | undefined;
    let rules: RobotsRules | undefined;
    if (spider.obeyRobotsTxt) {
      const found = await this.robots.lookup(url.origin);
      if (found === 'missing') {
        // Another fetcher is fetching it: come back in a moment rather than fetch it twice.
        if (!(await this.robots.lock(url.origin))) return { kind: 'wait', waitMs: 200 + Math.floor(Math.random() * 200), reason: 'robots.txt' };
        robotsOrigin = url.origin;
      } else if ('unavailable' in found) {
        return { kind: 'robots-unavailable', reason: `robots.txt of ${url.origin} is unavailable (${found.unavailable}); not crawling the host until it answers` };
      } else {
        if (!found.rules.isAllowed(input.url)) return { kind: 'disallowed' };
        crawlDelayMs = found.rules.crawlDelayMs;
        rules = found.rules;
      }
    }
    const target = robotsOrigin ? `${robotsOrigin}/robots.txt` : input.url;
    const policy = hostPolicy(spider, url.hostname, crawlDelayMs);
    const proxies = this.pool.size > 0 ? orderProxies(spider.proxies.strategy, await this.pool.health(), { now: Date.now(), avoid: input.avoidProxies }) : [];
    if (this.pool.size > 0 && proxies.length === 0) {
      if (robotsOrigin) await this.robots.unlock(robotsOrigin);
      this.log.warn({ url: input.url }, 'every proxy is banned: waiting for a probe to bring one back');
      return { kind: 'wait', waitMs: NO_PROXY_WAIT_MS, reason: 'no-proxy' };
    }
    const grant = await this.limiter.acquire({
      host: url.hostname,
      leaseId: input.leaseId,
      leaseMs: spider.limits.timeoutMs + 10_000,
      policy,
      jitter: jitterFactor(policy.randomize),
      deferrals: input.deferrals,
      proxies,
      ratePerProxy: spider.proxies.ratePerProxy,
      burstPerProxy: spider.proxies.burstPerProxy,
      maxHoldMs: spider.retry.maxRetryAfterMs,
      line: input.crawlId ?? '',
    });
    if (!grant.go) {
      if (robotsOrigin) await this.robots.unlock(robotsOrigin);
      return { kind: 'wait', waitMs: grant.waitMs, reason: grant.reason };
    }
    const proxy = grant.proxy ? this.pool.entries.find((e) => e.id === grant.proxy!.id) : undefined;

    let page: FetchResult | undefined;
    let error: unknown;
    try {
      // A chain of redirects is bounded as a whole: those that led to a page count against its request's.
      const limits = robotsOrigin ? spider.limits : { ...spider.limits, maxRedirects: Math.max(0, spider.limits.maxRedirects - (input.redirects ?? 0)) };
      page = await (input.load && !robotsOrigin
        ? input.load(target, {
            userAgent: input.userAgent,
            timeoutMs: spider.limits.timeoutMs,
            ...(input.signal ? { signal: input.signal } : {}),
            // The browser's redirects under the plain request's rules.
            followRedirect: (from: URL, to: URL) => isInlineRedirect(from, to) && (rules?.isAllowed(to.href) ?? true),
            maxRedirects: limits.maxRedirects,
          })
        : fetchPage(
            target,
            { ...spider, limits },
            {
              userAgent: input.userAgent,
              // Through a proxy, the agent resolves and vets the name with this lookup, and tunnels to the IP.
              ...(proxy ? { agent: this.pool.agents(proxy.id, spider.proxies) } : {}),
              ...(this.lookup ? { lookup: this.lookup } : {}),
              // robots.txt follows every redirect (RFC 9309); a page only same-origin ones its robots.txt allows.
              ...(robotsOrigin
                ? { maxResponseBytes: ROBOTS_FETCH_MAX_BYTES }
                : {
                    followRedirect: (from: URL, to: URL) => isInlineRedirect(from, to) && (rules?.isAllowed(to.href) ?? true),
                    ...(input.request ? { request: input.request } : {}),
                    ...(input.keepWire ? { keepWire: true } : {}),
                  }),
            },
          ));
    } catch (err) {
      error = err;
    }

    const verdict = page ? classifyResponse(page, spider) : undefined;
    const retryAfterMs = page && (page.status === 429 || page.status === 503) ? parseRetryAfter(headerValue(page.headers, 'retry-after'), Date.now(), spider.retry.maxRetryAfterMs) : undefined;
    const proxyFault = error !== undefined && proxy !== undefined && isProxyFault(error);
    const proxyOutcome: ProxyOutcome | undefined = !proxy ? undefined : page ? (verdict?.kind === 'blocked' && !robotsOrigin ? 'block' : 'ok') : proxyFault ? 'fail' : undefined;
    const banned = await this.limiter.release({
      host: url.hostname,
      leaseId: input.leaseId,
      ...(page ? { latencyMs: page.elapsedMs } : {}),
      ...(retryAfterMs !== undefined ? { holdMs: retryAfterMs } : {}),
      ...(policy.autoThrottle.enabled && !proxyFault
        ? { hostDelayMs: nextThrottleDelay(grant.hostDelayMs, { latencyMs: page?.elapsedMs ?? spider.limits.timeoutMs, ...(page ? { status: page.status } : {}), failed: !page }, policy) }
        : {}),
      ...(proxy && proxyOutcome ? { proxy: { id: proxy.id, outcome: proxyOutcome } } : {}),
      banAfterFailures: spider.proxies.banAfterFailures,
      probeAfterMs: FIRST_PROBE_AFTER_MS,
      maxHoldMs: spider.retry.maxRetryAfterMs,
    });
    if (banned) {
      this.pool.invalidate();
      this.log.warn({ proxy: proxy!.label, banAfterFailures: spider.proxies.banAfterFailures }, 'proxy banned after repeated failures; probing it in the background');
    }

    const host: HostTurnReport = {
      concurrency: policy.concurrency,
      delayMs: grant.hostDelayMs,
      startedAt: grant.startedAt,
      ...(retryAfterMs !== undefined ? { holdUntil: grant.startedAt + (page?.elapsedMs ?? 0) + retryAfterMs } : {}),
    };
    if (robotsOrigin) {
      // A proxy that failed says nothing of the site; an address the SSRF guard refuses is the URL's
      // own fault: neither is the site's robots.txt being unavailable.
      if (proxyFault || (error as { code?: string } | undefined)?.code === 'ERR_FORBIDDEN_ADDRESS') {
        await this.robots.unlock(robotsOrigin);
        return { kind: 'error', error, proxy, proxyFault, host };
      }
      const fetched: RobotsFetch = page ? { status: page.status, body: page.body.toString('utf8') } : { unavailable: (error as Error).message };
      await this.robots.store(robotsOrigin, fetched);
      this.log.debug({ origin: robotsOrigin, status: page?.status }, 'robots.txt fetched');
      // The rules are known now; the page itself takes its own turn.
      return this.fetch(input);
    }
    if (!page) return { kind: 'error', error, proxy, proxyFault, host };
    return { kind: 'response', page, verdict: verdict!, proxy, retryAfterMs, host };
  }
}
