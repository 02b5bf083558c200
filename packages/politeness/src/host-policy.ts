import { hostLimits, type Spider } from '@crawlfleet/core';

/** What holds for one host: the spider's politeness, its `hosts` override, and robots.txt's Crawl-delay. */
export interface HostPolicy {
  concurrency: number;
  /** the delay between two request starts, in ms, before jitter and AutoThrottle */
  delayMs: number;
  randomize: boolean;
  autoThrottle: { enabled: boolean; targetConcurrency: number; maxDelay: number };
}

/** Pure: the policy for `hostname`. A robots.txt Crawl-delay only ever raises the delay. */
export function hostPolicy(spider: Pick<Spider, 'politeness' | 'hosts'>, hostname: string, crawlDelayMs = 0): HostPolicy {
  const limits = hostLimits(spider, hostname);
  return { ...limits, delayMs: Math.max(limits.delayMs, crawlDelayMs), autoThrottle: spider.politeness.autoThrottle };
}

/** Pure: Scrapy's RANDOMIZE_DOWNLOAD_DELAY: each wait is 0.5 to 1.5 times the delay. */
export function jitterFactor(randomize: boolean, random: () => number = Math.random): number {
  return randomize ? 0.5 + random() : 1;
}

/**
 * Pure: AutoThrottle, as Scrapy computes it. The delay moves halfway towards latency / target
 * concurrency, never below the configured delay nor above maxDelay. An error response does not lower
 * the delay (error pages are fast, which would speed up a struggling site); a failure, a block or a
 * 429/503 doubles it, as a server under strain answers with those first.
 */
export function nextThrottleDelay(current: number, outcome: { latencyMs: number; status?: number; failed: boolean }, policy: Pick<HostPolicy, 'delayMs' | 'autoThrottle'>): number {
  const { maxDelay, targetConcurrency } = policy.autoThrottle;
  const bound = (d: number) => Math.round(Math.min(Math.max(d, policy.delayMs), maxDelay));
  if (outcome.failed || outcome.status === 429 || outcome.status === 503) return bound(Math.max(current * 2, 250));
  const target = outcome.latencyMs / targetConcurrency;
  const next = bound(Math.max(target, (current + target) / 2));
  if (outcome.status !== undefined && (outcome.status < 200 || outcome.status >= 300) && next <= current) return bound(current);
  return next;
}
