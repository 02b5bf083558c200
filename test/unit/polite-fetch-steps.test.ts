import { validateSpider } from '@crawlfleet/core';
import type { FetchResult } from '@crawlfleet/fetch';
import {
  chainLimits,
  FIRST_PROBE_AFTER_MS,
  hostPolicy,
  hostTurnReport,
  inlineRedirectRule,
  judgeExchange,
  pageFetchOptions,
  pageLoadOptions,
  releaseInput,
  robotsAnswer,
  robotsGate,
  robotsRules,
} from '@crawlfleet/politeness';

const spider = validateSpider({ name: 'p' });
const throttled = validateSpider({ name: 't', politeness: { autoThrottle: { enabled: true } } });
const rules = robotsRules('http://site.test', { status: 200, body: 'User-agent: *\nDisallow: /private\nCrawl-delay: 2\n' })!;

function page(status: number, headers: Record<string, string> = {}, body = '<html><body><p>Plenty of ordinary content here.</p></body></html>'): FetchResult {
  return { url: 'http://site.test/a', status, headers, contentType: 'text/html', body: Buffer.from(body), elapsedMs: 800, redirects: 0 };
}
const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:8080'), { code: 'ECONNREFUSED' });
const timedOut = Object.assign(new Error('Timeout awaiting response'), { code: 'ETIMEDOUT' });

describe("the polite fetch's pure steps", () => {
  test('robotsGate: unavailable rules hold the host, disallowed URLs end, allowed ones go with Crawl-delay', () => {
    expect(robotsGate({ unavailable: 'HTTP 503' }, 'http://site.test/a', 'http://site.test')).toEqual({
      kind: 'robots-unavailable',
      reason: 'robots.txt of http://site.test is unavailable (HTTP 503); not crawling the host until it answers',
    });
    expect(robotsGate({ rules }, 'http://site.test/private/x', 'http://site.test')).toEqual({ kind: 'disallowed' });
    const gate = robotsGate({ rules }, 'http://site.test/a', 'http://site.test');
    expect(gate).toEqual({ robotsOrigin: undefined, rules, crawlDelayMs: 2000 });
    expect((gate as { rules: unknown }).rules).toBe(rules);
  });

  test("chainLimits: robots.txt keeps the spider's limits; a page's redirects are what its chain has left", () => {
    const limits = { maxResponseBytes: 100, timeoutMs: 5000, maxRedirects: 5 };
    expect(chainLimits(limits, true, 3)).toBe(limits);
    expect(chainLimits(limits, false, undefined)).toEqual(limits);
    expect(chainLimits(limits, false, 3)).toEqual({ maxResponseBytes: 100, timeoutMs: 5000, maxRedirects: 2 });
    expect(chainLimits(limits, false, 9)).toEqual({ maxResponseBytes: 100, timeoutMs: 5000, maxRedirects: 0 });
  });

  test('inlineRedirectRule: same origin only, and only where robots.txt allows', () => {
    const from = new URL('http://site.test/a');
    expect(inlineRedirectRule(rules)(from, new URL('http://site.test/b'))).toBe(true);
    expect(inlineRedirectRule(rules)(from, new URL('http://site.test/private/b'))).toBe(false);
    expect(inlineRedirectRule(rules)(from, new URL('http://other.test/b'))).toBe(false);
    expect(inlineRedirectRule(rules)(from, new URL('https://site.test/b'))).toBe(false);
    expect(inlineRedirectRule(undefined)(from, new URL('http://site.test/private/b'))).toBe(true);
    expect(inlineRedirectRule(undefined)(from, new URL('http://other.test/b'))).toBe(false);
  });

  test("pageLoadOptions: the job's user agent, the spider's timeout, the deadline's signal and the chain's redirects", () => {
    const input = { url: 'http://site.test/a', spider, leaseId: 'j', deferrals: 0, userAgent: 'UA' };
    const plain = pageLoadOptions(input, 4, rules);
    expect(Object.keys(plain)).toEqual(['userAgent', 'timeoutMs', 'followRedirect', 'maxRedirects']);
    expect(plain).toMatchObject({ userAgent: 'UA', timeoutMs: 30_000, maxRedirects: 4 });
    expect(plain.followRedirect!(new URL('http://site.test/a'), new URL('http://site.test/private'))).toBe(false);
    expect(plain.followRedirect!(new URL('http://site.test/a'), new URL('http://site.test/b'))).toBe(true);
    const signal = new AbortController().signal;
    const withSignal = pageLoadOptions({ ...input, signal }, 0, undefined);
    expect(Object.keys(withSignal)).toEqual(['userAgent', 'timeoutMs', 'signal', 'followRedirect', 'maxRedirects']);
    expect(withSignal.signal).toBe(signal);
    expect(withSignal.maxRedirects).toBe(0);
  });

  test("pageFetchOptions: the redirect rule always, the hook's shape and the wire only when asked", () => {
    expect(Object.keys(pageFetchOptions({}, rules))).toEqual(['followRedirect']);
    expect(pageFetchOptions({ keepWire: false }, rules).keepWire).toBeUndefined();
    const request = { method: 'POST' as const, headers: { 'x-a': '1' }, body: 'q=1' };
    const full = pageFetchOptions({ request, keepWire: true }, undefined);
    expect(Object.keys(full)).toEqual(['followRedirect', 'request', 'keepWire']);
    expect(full.request).toBe(request);
    expect(full.keepWire).toBe(true);
  });

  test('judgeExchange: a page without a proxy has its verdict and nothing for a proxy', () => {
    const facts = judgeExchange({ page: page(200), error: undefined }, spider, { proxied: false, robots: false });
    expect(facts).toEqual({ verdict: { kind: 'ok' }, retryAfterMs: undefined, proxyFault: false, proxyOutcome: undefined });
  });

  test('judgeExchange: a 429 or 503 has its Retry-After (seconds or a date, capped); other statuses none', () => {
    const now = () => Date.parse('Sun, 06 Dec 2026 06:00:00 GMT');
    expect(judgeExchange({ page: page(503, { 'retry-after': '5' }), error: undefined }, spider, { proxied: true, robots: false }, now)).toEqual({
      verdict: { kind: 'retry', reason: 'HTTP 503' },
      retryAfterMs: 5000,
      proxyFault: false,
      proxyOutcome: 'ok',
    });
    expect(judgeExchange({ page: page(503, { 'retry-after': 'Sun, 06 Dec 2026 06:00:30 GMT' }), error: undefined }, spider, { proxied: false, robots: false }, now).retryAfterMs).toBe(30_000);
    expect(judgeExchange({ page: page(429, { 'retry-after': '86400' }), error: undefined }, spider, { proxied: false, robots: false }, now).retryAfterMs).toBe(300_000);
    expect(judgeExchange({ page: page(500, { 'retry-after': '5' }), error: undefined }, spider, { proxied: false, robots: false }, now).retryAfterMs).toBeUndefined();
    expect(judgeExchange({ page: page(503), error: undefined }, spider, { proxied: false, robots: false }, now).retryAfterMs).toBeUndefined();
  });

  test("judgeExchange: a block is the proxy's block for a page, and ok for robots.txt", () => {
    const blocked = { kind: 'blocked', signal: 'http-403', reason: 'blocked: HTTP 403' };
    expect(judgeExchange({ page: page(403), error: undefined }, spider, { proxied: true, robots: false })).toEqual({
      verdict: blocked,
      retryAfterMs: undefined,
      proxyFault: false,
      proxyOutcome: 'block',
    });
    expect(judgeExchange({ page: page(403), error: undefined }, spider, { proxied: true, robots: true })).toEqual({ verdict: blocked, retryAfterMs: undefined, proxyFault: false, proxyOutcome: 'ok' });
    expect(judgeExchange({ page: page(403), error: undefined }, spider, { proxied: false, robots: false }).proxyOutcome).toBeUndefined();
  });

  test("judgeExchange: an error is the proxy's failure only when the proxy itself failed", () => {
    expect(judgeExchange({ page: undefined, error: refused }, spider, { proxied: true, robots: false })).toEqual({
      verdict: undefined,
      retryAfterMs: undefined,
      proxyFault: true,
      proxyOutcome: 'fail',
    });
    expect(judgeExchange({ page: undefined, error: timedOut }, spider, { proxied: true, robots: false })).toEqual({
      verdict: undefined,
      retryAfterMs: undefined,
      proxyFault: false,
      proxyOutcome: undefined,
    });
    expect(judgeExchange({ page: undefined, error: refused }, spider, { proxied: false, robots: false })).toEqual({
      verdict: undefined,
      retryAfterMs: undefined,
      proxyFault: false,
      proxyOutcome: undefined,
    });
  });

  const lease = (s: typeof spider, proxyId?: string) => ({ host: 'site.test', leaseId: 'job1', policy: hostPolicy(s, 'site.test'), hostDelayMs: 1000, proxyId });
  const quiet = { verdict: { kind: 'ok' as const }, retryAfterMs: undefined, proxyFault: false, proxyOutcome: undefined };

  test('releaseInput: the lease back with the latency; no AutoThrottle delay unless enabled, no proxy without one', () => {
    expect(releaseInput(spider, lease(spider), page(200), quiet)).toEqual({
      host: 'site.test',
      leaseId: 'job1',
      latencyMs: 800,
      banAfterFailures: 10,
      probeAfterMs: FIRST_PROBE_AFTER_MS,
      maxHoldMs: 300_000,
    });
  });

  test("releaseInput: AutoThrottle's next delay from the page, or doubled for a failure; a hold and the proxy's outcome", () => {
    expect(releaseInput(throttled, lease(throttled, 'px1'), page(503), { ...quiet, retryAfterMs: 5000, proxyOutcome: 'ok' })).toEqual({
      host: 'site.test',
      leaseId: 'job1',
      latencyMs: 800,
      holdMs: 5000,
      hostDelayMs: 2000,
      proxy: { id: 'px1', outcome: 'ok' },
      banAfterFailures: 10,
      probeAfterMs: FIRST_PROBE_AFTER_MS,
      maxHoldMs: 300_000,
    });
    expect(releaseInput(throttled, lease(throttled), page(200), quiet).hostDelayMs).toBe(525);
    expect(releaseInput(throttled, lease(throttled), undefined, { ...quiet, verdict: undefined })).toEqual({
      host: 'site.test',
      leaseId: 'job1',
      hostDelayMs: 2000,
      banAfterFailures: 10,
      probeAfterMs: FIRST_PROBE_AFTER_MS,
      maxHoldMs: 300_000,
    });
  });

  test("releaseInput: a proxy's own failure leaves the host's delay alone, and a request without an outcome leaves the proxy alone", () => {
    const failed = releaseInput(throttled, lease(throttled, 'px1'), undefined, { verdict: undefined, retryAfterMs: undefined, proxyFault: true, proxyOutcome: 'fail' });
    expect(failed).toEqual({ host: 'site.test', leaseId: 'job1', proxy: { id: 'px1', outcome: 'fail' }, banAfterFailures: 10, probeAfterMs: FIRST_PROBE_AFTER_MS, maxHoldMs: 300_000 });
    expect(releaseInput(spider, lease(spider, 'px1'), undefined, { ...quiet, verdict: undefined }).proxy).toBeUndefined();
  });

  test("hostTurnReport: the host's concurrency, the delay it was held to, the start, and a hold from the start plus the request's time", () => {
    const grant = { hostDelayMs: 250, startedAt: 1_000_000 };
    expect(hostTurnReport({ concurrency: 2 }, grant, page(200), undefined)).toEqual({ concurrency: 2, delayMs: 250, startedAt: 1_000_000 });
    expect(hostTurnReport({ concurrency: 2 }, grant, page(503), 5000)).toEqual({ concurrency: 2, delayMs: 250, startedAt: 1_000_000, holdUntil: 1_005_800 });
    expect(hostTurnReport({ concurrency: 2 }, grant, undefined, 5000)).toEqual({ concurrency: 2, delayMs: 250, startedAt: 1_000_000, holdUntil: 1_005_000 });
  });

  test("robotsAnswer: the answer or the failure is stored; a proxy's failure or the SSRF guard's refusal says nothing of the site", () => {
    expect(robotsAnswer({ page: page(404, {}, 'nope'), error: undefined }, false)).toEqual({ status: 404, body: 'nope' });
    expect(robotsAnswer({ page: undefined, error: timedOut }, false)).toEqual({ unavailable: 'Timeout awaiting response' });
    expect(robotsAnswer({ page: undefined, error: refused }, true)).toBeUndefined();
    const forbidden = Object.assign(new Error('site.test resolves to 127.0.0.1'), { code: 'ERR_FORBIDDEN_ADDRESS' });
    expect(robotsAnswer({ page: undefined, error: forbidden }, false)).toBeUndefined();
  });
});
