import { runScript, type Keys, type RedisClient } from '@crawlfleet/core';
import type { HostPolicy } from './host-policy.js';
import type { ProxyHealth } from './proxy-health.js';

export type WaitReason = 'retry-after' | 'delay' | 'concurrency' | 'proxy-rate' | 'no-proxy';

export type Grant = { go: true; proxy: ProxyHealth | undefined; hostDelayMs: number } | { go: false; waitMs: number; reason: WaitReason };

export interface AcquireInput {
  host: string;
  leaseId: string;
  /** a lease outlives the request's own timeout, so only a crashed fetcher's lease expires */
  leaseMs: number;
  policy: HostPolicy;
  jitter: number;
  /** how many times this job has waited before */
  deferrals: number;
  /** proxies in order of preference; empty for a direct request */
  proxies: ProxyHealth[];
  ratePerProxy: number;
  burstPerProxy: number;
  /** a host hold (Retry-After) longer than this from now counts as this long (retry.maxRetryAfterMs) */
  maxHoldMs: number;
  /** whose line of deferred requests a newcomer joins: the crawl id */
  line: string;
}

export type ProxyOutcome = 'ok' | 'fail' | 'block';

export interface ReleaseInput {
  host: string;
  leaseId: string;
  latencyMs?: number;
  /** hold the whole host this long (Retry-After) */
  holdMs?: number;
  /** AutoThrottle's new delay for the host */
  hostDelayMs?: number;
  proxy?: { id: string; outcome: ProxyOutcome };
  banAfterFailures: number;
  probeAfterMs: number;
  /** the longest hold this release may set (retry.maxRetryAfterMs) */
  maxHoldMs: number;
}

/**
 * The fleet-wide limiter: per-host concurrency, delay and Retry-After holds, and per-proxy request
 * rates, all in Redis and changed atomically (acquireSlot-v.lua, releaseSlot-v.lua).
 */
export class Limiter {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  async acquire(input: AcquireInput): Promise<Grant> {
    const k = this.keys.polite();
    const { policy } = input;
    const [go, value, extra] = await runScript<[number, number, string]>(
      this.redis,
      'acquireSlot',
      [k.host(input.host), k.hostLeases(input.host), ...input.proxies.map((p) => k.proxy(p.id))],
      [
        input.leaseId,
        input.leaseMs,
        policy.concurrency,
        policy.delayMs,
        input.jitter,
        policy.autoThrottle.enabled ? '1' : '0',
        policy.autoThrottle.maxDelay,
        input.deferrals,
        input.ratePerProxy,
        input.burstPerProxy,
        input.maxHoldMs,
        input.line,
      ],
    );
    if (go === 1) return { go: true, proxy: value > 0 ? input.proxies[value - 1] : undefined, hostDelayMs: Number(extra) };
    return { go: false, waitMs: value, reason: extra as WaitReason };
  }

  /** Returns true when this outcome banned the proxy. */
  async release(input: ReleaseInput): Promise<boolean> {
    const k = this.keys.polite();
    const result = await runScript<string>(
      this.redis,
      'releaseSlot',
      [k.host(input.host), k.hostLeases(input.host), ...(input.proxy ? [k.proxy(input.proxy.id)] : [])],
      [
        input.leaseId,
        input.latencyMs === undefined ? '' : Math.round(input.latencyMs),
        input.holdMs === undefined ? '' : Math.round(input.holdMs),
        input.hostDelayMs === undefined ? '' : Math.round(input.hostDelayMs),
        input.proxy?.outcome ?? '',
        input.banAfterFailures,
        input.probeAfterMs,
        input.maxHoldMs,
      ],
    );
    return result === 'banned';
  }
}
