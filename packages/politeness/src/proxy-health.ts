import type { Spider } from '@crawlfleet/core';

/** A proxy's health as every fetcher sees it (kept in Redis by proxyOutcome-1.lua). */
export interface ProxyHealth {
  id: string;
  label: string;
  ok: number;
  fail: number;
  blocks: number;
  /** failures in a row; banAfterFailures of them ban the proxy */
  consecutive: number;
  bans: number;
  latencyMs: number | undefined;
  lastOkAt: number | undefined;
  lastFailAt: number | undefined;
  usedAt: number | undefined;
  banned: boolean;
  probeAt: number | undefined;
}

const num = (v: string | undefined) => (v === undefined || v === '' ? undefined : Number(v));

export function healthFromHash(id: string, label: string, hash: Record<string, string>): ProxyHealth {
  return {
    id,
    label,
    ok: num(hash.ok) ?? 0,
    fail: num(hash.fail) ?? 0,
    blocks: num(hash.blocks) ?? 0,
    consecutive: num(hash.consec) ?? 0,
    bans: num(hash.bans) ?? 0,
    latencyMs: num(hash.lat),
    lastOkAt: num(hash.lastOk),
    lastFailAt: num(hash.lastFail),
    usedAt: num(hash.used),
    banned: hash.banned === '1',
    probeAt: num(hash.probeAt),
  };
}

/**
 * Pure: the article's ProxyPool score, higher is better: success rate 0.6, recency of the last
 * success 0.2 (fading over an hour), speed 0.2 (0 at 5 s). Unlike the article, a proxy with no
 * history starts at an even 0.5 on each part instead of 0, so a new proxy gets tried.
 */
export function proxyScore(h: ProxyHealth, now: number): number {
  if (h.banned) return 0;
  const successRate = (h.ok + 1) / (h.ok + h.fail + 2);
  const recency = h.lastOkAt === undefined ? 0.5 : Math.max(0, 1 - (now - h.lastOkAt) / 3_600_000);
  const speed = h.latencyMs === undefined ? 0.5 : Math.max(0, 1 - h.latencyMs / 5000);
  return successRate * 0.6 + recency * 0.2 + speed * 0.2;
}

/**
 * Pure: the order in which to try proxies for one request, by the spider's strategy. Banned proxies
 * are left out; so are the ones this URL was already blocked through, unless that leaves none.
 * - weighted: a draw in proportion to score (without replacement, so the rest follow as fallbacks);
 * - random: a shuffle;
 * - round_robin: least recently used first.
 */
export function orderProxies(
  strategy: Spider['proxies']['strategy'],
  proxies: ProxyHealth[],
  options: { now: number; avoid?: readonly string[]; random?: () => number; limit?: number; prefer?: ReadonlySet<string> },
): ProxyHealth[] {
  const random = options.random ?? Math.random;
  const usable = proxies.filter((p) => !p.banned);
  const fresh = usable.filter((p) => !options.avoid?.includes(p.id));
  const pool = fresh.length > 0 ? fresh : usable;
  let ordered: ProxyHealth[];
  if (strategy === 'round_robin') {
    ordered = [...pool].sort((a, b) => (a.usedAt ?? 0) - (b.usedAt ?? 0) || a.id.localeCompare(b.id));
  } else if (strategy === 'random') {
    ordered = pool
      .map((p) => ({ p, k: random() }))
      .sort((a, b) => a.k - b.k)
      .map((x) => x.p);
  } else {
    // Efraimidis–Spirakis: key u^(1/w); sorting by it draws in proportion to the weights.
    ordered = pool
      .map((p) => ({ p, k: random() ** (1 / Math.max(proxyScore(p, options.now), 0.01)) }))
      .sort((a, b) => b.k - a.k)
      .map((x) => x.p);
  }
  // The proxies that hold one of the host's sessions go first (in the strategy's order): the host
  // keeps seeing the identities it knows, rather than a new one for every other proxy.
  const prefer = options.prefer;
  if (prefer && prefer.size > 0) ordered = [...ordered.filter((p) => prefer.has(p.id)), ...ordered.filter((p) => !prefer.has(p.id))];
  return ordered.slice(0, options.limit ?? 8);
}
