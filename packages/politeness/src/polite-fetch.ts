import { causeChain, parseRetryAfter, type Keys, type Logger, type Spider, type RedisClient } from '@crawlfleet/core';
import {
  classifyResponse,
  fetchPage,
  headerValue,
  identityHeaders,
  isInlineRedirect,
  type FetchOptions,
  type FetchResult,
  type HttpRequestShape,
  type Lookup,
  type ResponseVerdict,
} from '@crawlfleet/fetch';
import { type HostPolicy, hostPolicy, jitterFactor, nextThrottleDelay } from './host-policy.js';
import { type Grant, Limiter, type ProxyOutcome, type ReleaseInput } from './limiter.js';
import { orderProxies } from './proxy-health.js';
import type { ProxyEntry } from './proxy-list.js';
import type { ProxyPool } from './proxy-pool.js';
import { ROBOTS_FETCH_MAX_BYTES, type RobotsCache, type RobotsFetch, type RobotsLookup, type RobotsRules } from './robots.js';
import { DEFAULT_SESSION_LIMITS, type RetireReason, type SessionLimits } from './session-choice.js';
import { isSessionFault, SessionStore, type SessionTake, type SessionView, sessionsFromHash } from './session-store.js';

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
  /**
   * what a code spider's request hook asks for, given the request's session (its cookies for the
   * URL); asked once the host's turn and the session are known, never for robots.txt nor a browser's load
   */
  requestFor?: (session: SessionView | undefined) => Promise<HttpRequestShape | undefined>;
  /** the longest the request hook may take (its deadline): the host's lease is held that much longer */
  hookMs?: number;
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

/** What a turn did to the fleet's sessions, for the metrics: a session begun, sessions retired (with why). */
export interface SessionEvents {
  began: number;
  retired: RetireReason[];
}

export type PoliteFetchOutcome = (
  | { kind: 'wait'; waitMs: number; reason: string }
  | { kind: 'disallowed' }
  | { kind: 'robots-unavailable'; reason: string }
  | { kind: 'response'; page: FetchResult; verdict: ResponseVerdict; proxy: ProxyEntry | undefined; retryAfterMs: number | undefined; host: HostTurnReport }
  | { kind: 'error'; error: unknown; proxy: ProxyEntry | undefined; proxyFault: boolean; host: HostTurnReport }
) & { sessions?: SessionEvents };

/** How long a job waits when every proxy is banned: about one probe round. */
const NO_PROXY_WAIT_MS = 2000;
/** When the first probe of a banned proxy comes. */
export const FIRST_PROBE_AFTER_MS = 2000;

/**
 * Pure: did the proxy itself fail (refused, unreachable, timed out before the tunnel opened, refused
 * our credentials)? Other errors (a tunnel the target reset, a slow page) say nothing against it.
 */
export function isProxyFault(err: unknown): boolean {
  for (const e of causeChain(err)) {
    if (e.code === 'ECONNREFUSED' || e.code === 'EHOSTUNREACH' || e.code === 'ENETUNREACH') return true;
    if (/Proxy timeout|Bad response: 407/.test(e.message ?? '')) return true;
  }
  return false;
}

/** What robots.txt lets this fetch do: the page under its rules, or first the origin's robots.txt itself. */
export interface RobotsGate {
  /** set when this turn fetches the origin's robots.txt (its lock is ours), not the page */
  robotsOrigin: string | undefined;
  /** the origin's rules (undefined when robots.txt is not obeyed, or not known yet) */
  rules: RobotsRules | undefined;
  crawlDelayMs: number | undefined;
}

/** One turn of a fetch: its request's target, under the host's slot and maybe a proxy. */
interface FetchTurn extends RobotsGate {
  input: PoliteFetchInput;
  url: URL;
  /** the page's URL, or its origin's robots.txt */
  target: string;
  policy: HostPolicy;
  grant: Extract<Grant, { go: true }>;
  proxy: ProxyEntry | undefined;
  /** the session the request goes as, once taken (prepare) */
  session?: SessionTake;
  /** what the request hook asked for (prepare) */
  shape?: HttpRequestShape;
}

/** What the request brought: a page, or the error it failed with. */
export interface FetchExchange {
  page: FetchResult | undefined;
  error: unknown;
  /** the request failed on the fleet's side (its session's cookies in Redis), not the site's nor the proxy's */
  internal?: boolean;
}

/** What an exchange says: the page's verdict, a Retry-After hold, and the proxy's part in it. */
export interface ExchangeFacts {
  verdict: ResponseVerdict | undefined;
  retryAfterMs: number | undefined;
  /** the proxy itself failed (isProxyFault) */
  proxyFault: boolean;
  /** what goes into the proxy's health: none for a request without a proxy, or an error that is not the proxy's */
  proxyOutcome: ProxyOutcome | undefined;
  /** set when the failure was the fleet's own (FetchExchange.internal): nothing is learnt of the host */
  internal?: true;
}

/**
 * One fetch, the polite way: robots.txt first (fetched once per host for the fleet), then a
 * fleet-wide slot for the host and a proxy's request (or how long to wait for one), then the
 * request, and then what was learnt goes back to Redis: the host's latency and AutoThrottle delay,
 * a Retry-After hold, the proxy's success, failure or block.
 */
export class PoliteFetcher {
  private readonly limiter: Limiter;
  /** the fleet's sessions: a host's plain requests go as one of them (a spider's `sessions`) */
  readonly sessions: SessionStore;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly pool: ProxyPool,
    private readonly robots: RobotsCache,
    private readonly log: Logger,
    /** resolves names in place of DNS (HOST_RESOLVE); each spider's address policy vets the answers */
    private readonly lookup?: Lookup,
  ) {
    this.limiter = new Limiter(redis, keys);
    this.sessions = new SessionStore(redis, keys, DEFAULT_SESSION_LIMITS);
  }

  /**
   * The steps: robots.txt → wait for the host (and pick a proxy) → the session and the request hook
   * → the request → classify → record what was learnt (a block retires the session) → robots.txt
   * kept (then the page's own turn), or the page's outcome.
   */
  async fetch(input: PoliteFetchInput): Promise<PoliteFetchOutcome> {
    const url = new URL(input.url);
    const gate = await this.passRobots(input, url);
    if ('kind' in gate) return gate;
    const turn = await this.waitForHost(input, url, gate);
    if ('kind' in turn) return turn;
    const unprepared = await this.prepare(turn);
    if (unprepared) return unprepared;
    const exchange = await this.send(turn);
    const facts = judgeExchange(exchange, input.spider, { proxied: turn.proxy !== undefined, robots: Boolean(turn.robotsOrigin) });
    await this.record(turn, exchange, facts);
    const sessions = await this.settleSession(turn, exchange, facts);
    const host = hostTurnReport(turn.policy, turn.grant, exchange.page, facts.retryAfterMs);
    // robots.txt's turn may have begun the host's session: its events go with the page's outcome.
    if (turn.robotsOrigin) return withSessionEvents(await this.keepRobots(turn, exchange, facts.proxyFault, host), sessions);
    const { page, error } = exchange;
    if (!page) return withSessionEvents({ kind: 'error', error, proxy: turn.proxy, proxyFault: facts.proxyFault, host }, sessions);
    return withSessionEvents({ kind: 'response', page, verdict: facts.verdict!, proxy: turn.proxy, retryAfterMs: facts.retryAfterMs, host }, sessions);
  }

  /** robots.txt first: its rules, or this turn fetches it (one fetcher of the fleet, under its lock), or an outcome without a request. */
  private async passRobots(input: PoliteFetchInput, url: URL): Promise<RobotsGate | PoliteFetchOutcome> {
    if (!input.spider.obeyRobotsTxt) return { robotsOrigin: undefined, rules: undefined, crawlDelayMs: undefined };
    const found = await this.robots.lookup(url.origin);
    if (found !== 'missing') return robotsGate(found, input.url, url.origin);
    // Another fetcher is fetching it: come back in a moment rather than fetch it twice.
    if (!(await this.robots.lock(url.origin))) return { kind: 'wait', waitMs: 200 + Math.floor(Math.random() * 200), reason: 'robots.txt' };
    return { robotsOrigin: url.origin, rules: undefined, crawlDelayMs: undefined };
  }

  /**
   * The proxies in the spider's order, then a fleet-wide slot for the host and a proxy's token
   * (acquireHost, takeProxy), or how long to wait for them; a wait lets go of the robots.txt lock.
   */
  private async waitForHost(input: PoliteFetchInput, url: URL, gate: RobotsGate): Promise<FetchTurn | PoliteFetchOutcome> {
    const { spider } = input;
    const target = gate.robotsOrigin ? `${gate.robotsOrigin}/robots.txt` : input.url;
    const policy = hostPolicy(spider, url.hostname, gate.crawlDelayMs);
    const prefer = await this.sessionProxies(input, url.hostname);
    const proxies = this.pool.size > 0 ? orderProxies(spider.proxies.strategy, await this.pool.health(), { now: Date.now(), avoid: input.avoidProxies, prefer }) : [];
    if (this.pool.size > 0 && proxies.length === 0) {
      if (gate.robotsOrigin) await this.robots.unlock(gate.robotsOrigin);
      this.log.warn({ url: input.url }, 'every proxy is banned: waiting for a probe to bring one back');
      return { kind: 'wait', waitMs: NO_PROXY_WAIT_MS, reason: 'no-proxy' };
    }
    const grant = await this.limiter.acquire({
      host: url.hostname,
      leaseId: input.leaseId,
      // The request's time, the request hook's (it runs inside the turn, told the session), and a margin.
      leaseMs: spider.limits.timeoutMs + (input.hookMs ?? 0) + 10_000,
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
      if (gate.robotsOrigin) await this.robots.unlock(gate.robotsOrigin);
      return { kind: 'wait', waitMs: grant.waitMs, reason: grant.reason };
    }
    const proxy = grant.proxy ? this.pool.entries.find((e) => e.id === grant.proxy!.id) : undefined;
    return { ...gate, input, url, target, policy, grant, proxy };
  }

  /**
   * Before anything is sent: the turn's session, then the request hook's shape for it. A failure of
   * either (Redis, the hook) is the outcome: the host is let go with nothing learnt of it (no
   * latency, no AutoThrottle change, nothing for the proxy's health).
   */
  private async prepare(turn: FetchTurn): Promise<PoliteFetchOutcome | undefined> {
    try {
      turn.session = await this.takeSession(turn);
      if (!turn.robotsOrigin && !turn.input.load && turn.input.requestFor) turn.shape = await this.hookedRequest(turn);
      return undefined;
    } catch (error) {
      const { input, url } = turn;
      try {
        await this.limiter.release({
          host: url.hostname,
          leaseId: input.leaseId,
          banAfterFailures: input.spider.proxies.banAfterFailures,
          probeAfterMs: FIRST_PROBE_AFTER_MS,
          maxHoldMs: input.spider.retry.maxRetryAfterMs,
        });
      } finally {
        if (turn.robotsOrigin) await this.robots.unlock(turn.robotsOrigin);
      }
      const sessions = turn.session ? eventsOfTake(turn.session) : undefined;
      return withSessionEvents({ kind: 'error', error, proxy: turn.proxy, proxyFault: false, host: hostTurnReport(turn.policy, turn.grant, undefined, undefined) }, sessions);
    }
  }

  /** The request hook's shape, told the session (its cookies for the URL read if the hook asks); the cookies it sets go into the session first. */
  private async hookedRequest(turn: FetchTurn): Promise<HttpRequestShape | undefined> {
    const held = turn.session?.session;
    const view = held ? { id: held.id, userAgent: held.profile, cookies: () => this.sessions.cookiesFor(held, turn.target) } : undefined;
    const shape = await turn.input.requestFor!(view);
    if (held && shape?.setCookies?.length) await this.sessions.storeCookies(held, turn.target, shape.setCookies);
    return shape;
  }

  /** The request, its failure caught: what it brought; a failure of its session's cookie store is the fleet's, not the site's. */
  private async send(turn: FetchTurn): Promise<FetchExchange> {
    try {
      return { page: await this.request(turn), error: undefined };
    } catch (err) {
      return { page: undefined, error: err, ...(isSessionFault(err) ? { internal: true } : {}) };
    }
  }

  /**
   * The host's session (in the crawl's scope) on the turn's proxy, for a plain request (robots.txt
   * too: one identity per address), when the spider keeps sessions; a renderer's turns take none
   * yet. A new session's profile is the job's user agent and the whole header set that goes with it.
   */
  private async takeSession(turn: FetchTurn): Promise<SessionTake | undefined> {
    const { input } = turn;
    if (!input.spider.sessions.enabled || input.load) return undefined;
    const place = { host: turn.url.hostname, scope: input.crawlId ?? '' };
    return await this.sessions.take(place, turn.proxy?.id ?? '', () => ({ userAgent: input.userAgent, headers: identityHeaders(input.userAgent) }), sessionLimits(input.spider));
  }

  /**
   * With more proxies than a host may have sessions, the proxies holding one of its sessions, to try
   * first (orderProxies); otherwise every proxy may hold one, and the strategy alone decides.
   */
  private async sessionProxies(input: PoliteFetchInput, host: string): Promise<Set<string> | undefined> {
    const { spider } = input;
    if (!spider.sessions.enabled || input.load || this.pool.size <= spider.sessions.maxPerHost) return undefined;
    try {
      const { sessions } = sessionsFromHash(await this.redis.hgetall(this.keys.polite().sessions(host, input.crawlId ?? '')));
      return new Set(sessions.map((s) => s.proxy));
    } catch (err) {
      // A preference only: without it the strategy alone orders the proxies.
      this.log.warn({ err, host }, "could not read the host's sessions to prefer their proxies");
      return undefined;
    }
  }

  /** A page blocked through its session retires it for the fleet; the turn's session events, for the metrics. */
  private async settleSession(turn: FetchTurn, exchange: FetchExchange, facts: ExchangeFacts): Promise<SessionEvents | undefined> {
    const taken = turn.session;
    if (!taken) return undefined;
    const events = eventsOfTake(taken);
    if (exchange.page && facts.verdict?.kind === 'blocked' && !turn.robotsOrigin && (await this.sessions.retire(taken.session))) events.retired.push('blocked');
    return events;
  }

  /** The page loader's load (a browser) or one plain request: robots.txt is always a plain one. */
  private request(turn: FetchTurn): Promise<FetchResult> {
    const { input, robotsOrigin, rules, target } = turn;
    const { spider } = input;
    // A chain of redirects is bounded as a whole: those that led to a page count against its request's.
    const limits = chainLimits(spider.limits, Boolean(robotsOrigin), input.redirects);
    if (input.load && !robotsOrigin) return input.load(target, pageLoadOptions(input, limits.maxRedirects, rules));
    return fetchPage(target, { ...spider, limits }, this.fetchOptions(turn));
  }

  /** A plain request's options: through the turn's proxy, with the fleet's lookup; robots.txt's own size cap, or the page's redirects, hook and wire. */
  private fetchOptions(turn: FetchTurn): FetchOptions {
    const { input, proxy, robotsOrigin, rules } = turn;
    const session = turn.session?.session;
    const hookCookie = turn.shape?.headers.cookie;
    return {
      // A session sends its own profile (its User-Agent and header set, the same from every fetcher)
      // and, for a page, its cookies with a request hook's after them; robots.txt (whose redirects
      // may go anywhere) neither sends nor keeps any.
      userAgent: session?.profile ?? input.userAgent,
      ...(session?.headers ? { identityHeaders: session.headers } : {}),
      ...(session && !robotsOrigin ? { cookieJar: this.sessions.jar(session, hookCookie ? { cookie: hookCookie, origin: turn.url.origin } : undefined) } : {}),
      // Through a proxy, the agent resolves and vets the name with this lookup, and tunnels to the IP.
      ...(proxy ? { agent: this.pool.agents(proxy.id, input.spider.proxies) } : {}),
      ...(this.lookup ? { lookup: this.lookup } : {}),
      // robots.txt follows every redirect (RFC 9309); a page only same-origin ones its robots.txt allows.
      ...(robotsOrigin ? { maxResponseBytes: ROBOTS_FETCH_MAX_BYTES } : pageFetchOptions({ request: turn.shape, keepWire: input.keepWire }, rules)),
    };
  }

  /** releaseHost and proxyOutcome: the lease back, what was learnt of the host and the proxy; a ban is logged. */
  private async record(turn: FetchTurn, exchange: FetchExchange, facts: ExchangeFacts): Promise<void> {
    const { spider } = turn.input;
    const lease = { host: turn.url.hostname, leaseId: turn.input.leaseId, policy: turn.policy, hostDelayMs: turn.grant.hostDelayMs, proxyId: turn.proxy?.id };
    const banned = await this.limiter.release(releaseInput(spider, lease, exchange.page, facts));
    if (banned) {
      this.pool.invalidate();
      this.log.warn({ proxy: turn.proxy!.label, banAfterFailures: spider.proxies.banAfterFailures }, 'proxy banned after repeated failures; probing it in the background');
    }
  }

  /** A robots.txt fetched is stored for the fleet, and the page then takes its own turn; one that says nothing of the site lets go of the lock. */
  private async keepRobots(turn: FetchTurn, exchange: FetchExchange, proxyFault: boolean, host: HostTurnReport): Promise<PoliteFetchOutcome> {
    const robotsOrigin = turn.robotsOrigin!;
    const fetched = robotsAnswer(exchange, proxyFault);
    if (!fetched) {
      await this.robots.unlock(robotsOrigin);
      return { kind: 'error', error: exchange.error, proxy: turn.proxy, proxyFault, host };
    }
    await this.robots.store(robotsOrigin, fetched);
    this.log.debug({ origin: robotsOrigin, status: exchange.page?.status }, 'robots.txt fetched');
    // The rules are known now; the page itself takes its own turn.
    return this.fetch(turn.input);
  }
}

/** Pure: an outcome with a turn's session events added to those it carries. */
export function withSessionEvents(outcome: PoliteFetchOutcome, events: SessionEvents | undefined): PoliteFetchOutcome {
  if (!events) return outcome;
  const carried = outcome.sessions;
  return { ...outcome, sessions: carried ? { began: carried.began + events.began, retired: [...events.retired, ...carried.retired] } : events };
}

/** Pure: a spider's session limits. */
export function sessionLimits(spider: Pick<Spider, 'sessions'>): SessionLimits {
  const { maxPerHost, maxAgeMs, maxUses } = spider.sessions;
  return { maxPerHost, maxAgeMs, maxUses };
}

/** Pure: what an origin's known robots.txt says of a URL: not now (unavailable), never (disallowed), or go under its rules. */
export function robotsGate(found: Exclude<RobotsLookup, 'missing'>, url: string, origin: string): RobotsGate | PoliteFetchOutcome {
  if ('unavailable' in found) {
    return { kind: 'robots-unavailable', reason: `robots.txt of ${origin} is unavailable (${found.unavailable}); not crawling the host until it answers` };
  }
  if (!found.rules.isAllowed(url)) return { kind: 'disallowed' };
  return { robotsOrigin: undefined, rules: found.rules, crawlDelayMs: found.rules.crawlDelayMs };
}

/** Pure: the limits of one request. robots.txt has the spider's; a page's redirects left are those the chain that led to it has not spent. */
export function chainLimits<L extends { maxRedirects: number }>(limits: L, forRobots: boolean, redirects: number | undefined): L {
  return forRobots ? limits : { ...limits, maxRedirects: Math.max(0, limits.maxRedirects - (redirects ?? 0)) };
}

/** Pure: which redirects a page's request follows inline: same-origin ones its robots.txt allows (all same-origin ones without rules). */
export function inlineRedirectRule(rules: RobotsRules | undefined): (from: URL, to: URL) => boolean {
  return (from: URL, to: URL) => isInlineRedirect(from, to) && (rules?.isAllowed(to.href) ?? true);
}

/** Pure: a page loader's options: the job's user agent, timeout and deadline, and the plain request's redirect rules. */
export function pageLoadOptions(input: PoliteFetchInput, maxRedirects: number, rules: RobotsRules | undefined): PageLoadOptions {
  return {
    userAgent: input.userAgent,
    timeoutMs: input.spider.limits.timeoutMs,
    ...(input.signal ? { signal: input.signal } : {}),
    // The browser's redirects under the plain request's rules.
    followRedirect: inlineRedirectRule(rules),
    maxRedirects,
  };
}

/** Pure: what a page's plain request adds to robots.txt's: the inline redirect rule, the request hook's shape, the wire kept. */
export function pageFetchOptions(
  input: { request?: HttpRequestShape | undefined; keepWire?: boolean | undefined },
  rules: RobotsRules | undefined,
): Pick<FetchOptions, 'followRedirect' | 'request' | 'keepWire'> {
  return {
    followRedirect: inlineRedirectRule(rules),
    ...(input.request ? { request: input.request } : {}),
    ...(input.keepWire ? { keepWire: true } : {}),
  };
}

/**
 * Pure (the clock aside, read only for a Retry-After): what an exchange says. A page has its
 * verdict, and a 429 or 503 its Retry-After (capped); a proxy's outcome is a block for a page it
 * was blocked through, ok for any other answer, a failure only when the proxy itself failed.
 */
export function judgeExchange(exchange: FetchExchange, spider: Spider, how: { proxied: boolean; robots: boolean }, now: () => number = Date.now): ExchangeFacts {
  const { page, error } = exchange;
  if (exchange.internal) return { verdict: undefined, retryAfterMs: undefined, proxyFault: false, proxyOutcome: undefined, internal: true };
  const verdict = page ? classifyResponse(page, spider) : undefined;
  const retryAfterMs = page && (page.status === 429 || page.status === 503) ? parseRetryAfter(headerValue(page.headers, 'retry-after'), now(), spider.retry.maxRetryAfterMs) : undefined;
  const proxyFault = error !== undefined && how.proxied && isProxyFault(error);
  const proxyOutcome: ProxyOutcome | undefined = !how.proxied ? undefined : page ? (verdict?.kind === 'blocked' && !how.robots ? 'block' : 'ok') : proxyFault ? 'fail' : undefined;
  return { verdict, retryAfterMs, proxyFault, proxyOutcome };
}

/** The host's lease of one turn, as releaseHost needs it. */
export interface HostLease {
  host: string;
  leaseId: string;
  policy: HostPolicy;
  /** the delay between starts the host was held to (the grant's) */
  hostDelayMs: number;
  proxyId: string | undefined;
}

/** Pure: releaseHost's input: the page's latency, a Retry-After hold, the next AutoThrottle delay (not after a proxy's own failure), the proxy's outcome. */
export function releaseInput(spider: Spider, lease: HostLease, page: FetchResult | undefined, facts: ExchangeFacts): ReleaseInput {
  const { policy } = lease;
  return {
    host: lease.host,
    leaseId: lease.leaseId,
    ...(page ? { latencyMs: page.elapsedMs } : {}),
    ...(facts.retryAfterMs !== undefined ? { holdMs: facts.retryAfterMs } : {}),
    ...(policy.autoThrottle.enabled && !facts.proxyFault && !facts.internal
      ? { hostDelayMs: nextThrottleDelay(lease.hostDelayMs, { latencyMs: page?.elapsedMs ?? spider.limits.timeoutMs, ...(page ? { status: page.status } : {}), failed: !page }, policy) }
      : {}),
    ...(lease.proxyId !== undefined && facts.proxyOutcome ? { proxy: { id: lease.proxyId, outcome: facts.proxyOutcome } } : {}),
    banAfterFailures: spider.proxies.banAfterFailures,
    probeAfterMs: FIRST_PROBE_AFTER_MS,
    maxHoldMs: spider.retry.maxRetryAfterMs,
  };
}

/** Pure: what a fetch learnt of its host, for the frontier: a Retry-After hold runs from the request's start plus its time. */
export function hostTurnReport(
  policy: Pick<HostPolicy, 'concurrency'>,
  grant: { hostDelayMs: number; startedAt: number },
  page: FetchResult | undefined,
  retryAfterMs: number | undefined,
): HostTurnReport {
  return {
    concurrency: policy.concurrency,
    delayMs: grant.hostDelayMs,
    startedAt: grant.startedAt,
    ...(retryAfterMs !== undefined ? { holdUntil: grant.startedAt + (page?.elapsedMs ?? 0) + retryAfterMs } : {}),
  };
}

/**
 * Pure: what a robots.txt fetch says of its site, to store: the answer, or the error as `unavailable`.
 * undefined when it says nothing of the site.
 */
export function robotsAnswer(exchange: FetchExchange, proxyFault: boolean): RobotsFetch | undefined {
  const { page, error } = exchange;
  // A proxy that failed says nothing of the site; an address the SSRF guard refuses is the URL's
  // own fault: neither is the site's robots.txt being unavailable.
  if (proxyFault || (error as { code?: string } | undefined)?.code === 'ERR_FORBIDDEN_ADDRESS') return undefined;
  return page ? { status: page.status, body: page.body.toString('utf8') } : { unavailable: (error as Error).message };
}

/** Pure: what taking a session did, for the metrics: whether it began one, and the sessions it retired. */
function eventsOfTake(take: SessionTake): SessionEvents {
  return { began: take.began ? 1 : 0, retired: take.retired.map((r) => r.reason) };
}
