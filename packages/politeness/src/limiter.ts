import { runScript, type Keys, type RedisClient } from '@crawlfleet/core';
import type { HostPolicy } from './host-policy.js';
import type { ProxyHealth } from './proxy-health.js';

export type WaitReason = 'retry-after' | 'delay' | 'concurrency' | 'proxy-rate' | 'no-proxy';

/**
 * A grant: the request may start now (`startedAt`, on Redis's clock), through `proxy`; `hostDelayMs`
 * is the delay between starts the host was held to (the spider's, Crawl-delay, AutoThrottle).
 */
export type Grant = { go: true; proxy: ProxyHealth | undefined; hostDelayMs: number; startedAt: number } | { go: false; waitMs: number; reason: WaitReason };

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
 * rates, all in Redis and changed atomically. A host's keys and the proxies' keys live in two slots
 * (keys.ts), so a proxied request takes its host (acquireHost-2.lua), then its proxy
 * (takeProxy-v.lua), and gives the host back (undoHost-2.lua) when no proxy may send it yet.
 */
export class Limiter {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  async acquire(input: AcquireInput): Promise<Grant> {
    const k = this.keys.polite();
    const { policy } = input;
    const hostKeys = [k.host(input.host), k.hostLeases(input.host)];
    const [go, value, extra, previousLast, grantedAt] = await runScript<[number, number, string, string, string]>(this.redis, 'acquireHost', hostKeys, [
      input.leaseId,
      input.leaseMs,
      policy.concurrency,
      policy.delayMs,
      input.jitter,
      policy.autoThrottle.enabled ? '1' : '0',
      policy.autoThrottle.maxDelay,
      input.deferrals,
      input.maxHoldMs,
      input.line,
    ]);
    if (go !== 1) return { go: false, waitMs: value, reason: extra as WaitReason };
    const hostDelayMs = Number(extra);
    const startedAt = Number(grantedAt);
    if (input.proxies.length === 0) return { go: true, proxy: undefined, hostDelayMs, startedAt };
    const [proxyGo, proxyValue, proxyReason] = await runScript<[number, number, string]>(
      this.redis,
      'takeProxy',
      input.proxies.map((p) => k.proxy(p.id)),
      [input.ratePerProxy, input.burstPerProxy, input.deferrals, input.line],
    );
    if (proxyGo === 1) return { go: true, proxy: input.proxies[proxyValue - 1], hostDelayMs, startedAt };
    await runScript(this.redis, 'undoHost', hostKeys, [input.leaseId, previousLast, grantedAt]);
    return { go: false, waitMs: proxyValue, reason: proxyReason as WaitReason };
  }

  /** Returns true when this outcome banned the proxy. */
  async release(input: ReleaseInput): Promise<boolean> {
    const k = this.keys.polite();
    const latency = input.latencyMs === undefined ? '' : Math.round(input.latencyMs);
    await runScript(
      this.redis,
      'releaseHost',
      [k.host(input.host), k.hostLeases(input.host)],
      [input.leaseId, latency, input.holdMs === undefined ? '' : Math.round(input.holdMs), input.hostDelayMs === undefined ? '' : Math.round(input.hostDelayMs), input.maxHoldMs],
    );
    if (!input.proxy) return false;
    const result = await runScript<string>(this.redis, 'proxyOutcome', [k.proxy(input.proxy.id)], [input.proxy.outcome, latency, input.banAfterFailures, input.probeAfterMs]);
    return result === 'banned';
  }
}
