/**
 * Sessions (issue #30): one identity that a host sees for many requests, as a person would be seen: a
 * proxy (or none), one browser profile and a cookie jar, fixed for the session's life. The fleet
 * keeps them in Redis, so every fetcher and renderer shares them; this module holds the decisions,
 * pure, on plain records.
 *
 * A request's proxy is chosen first, as before (its health, bans and rate limit: limiter.ts); the
 * session is then the host's session on that proxy. So sessions add no second proxy choice, and a
 * proxy's rate limit still counts every request made through it.
 */

/** How sessions are bounded; they become a spider's `sessions` settings (docs/spider-format.md) when the fetch path takes sessions (docs/identity.md). */
export interface SessionLimits {
  /** sessions alive at once per host, across all proxies */
  maxPerHost: number;
  /** a session retires this long after it began */
  maxAgeMs: number;
  /** a session retires after this many requests */
  maxUses: number;
}

export const DEFAULT_SESSION_LIMITS: SessionLimits = { maxPerHost: 8, maxAgeMs: 30 * 60_000, maxUses: 100 };

/** Pure: what is wrong with a set of limits, or undefined: each must be a whole number of at least 1. */
export function sessionLimitsProblem(limits: SessionLimits): string | undefined {
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isInteger(value) || value < 1) return `sessions.${name} must be a whole number of at least 1, not ${value}`;
  }
  return undefined;
}

export interface SessionRecord {
  id: string;
  /** the proxy's id, or '' for a direct connection */
  proxy: string;
  /** the browser profile: the User-Agent it sends */
  profile: string;
  /** the whole header set that goes with the User-Agent (client hints, Accept, Sec-Fetch-*), sent by every fetcher alike */
  headers?: Record<string, string>;
  createdAt: number;
  uses: number;
  lastUsedAt: number;
}

export type RetireReason = 'age' | 'uses' | 'blocked' | 'room';

/** Pure: why a session may not serve another request now, or undefined while it may. */
export function expiryOf(session: SessionRecord, now: number, limits: SessionLimits): RetireReason | undefined {
  if (now - session.createdAt >= limits.maxAgeMs) return 'age';
  if (session.uses >= limits.maxUses) return 'uses';
  return undefined;
}

export type SessionChoice = { kind: 'reuse'; session: SessionRecord; retire: Array<{ id: string; reason: RetireReason }> } | { kind: 'create'; retire: Array<{ id: string; reason: RetireReason }> };

/**
 * Pure: the session a request to a host through `proxy` takes, given the host's live sessions.
 * - Sessions past their age or uses retire.
 * - The proxy's session that has served least is reused, so that a host sees few identities.
 * - Without one, a new session begins; when the host already has `maxPerHost`, the one used least
 *   recently retires to make room.
 */
export function chooseSession(sessions: readonly SessionRecord[], proxy: string, now: number, limits: SessionLimits): SessionChoice {
  const retire: Array<{ id: string; reason: RetireReason }> = [];
  const live: SessionRecord[] = [];
  for (const session of sessions) {
    const reason = expiryOf(session, now, limits);
    if (reason) retire.push({ id: session.id, reason });
    else live.push(session);
  }
  const mine = live.filter((s) => s.proxy === proxy).sort((a, b) => a.uses - b.uses || a.createdAt - b.createdAt);
  if (mine[0]) return { kind: 'reuse', session: mine[0], retire };
  const byLastUse = [...live].sort((a, b) => a.lastUsedAt - b.lastUsedAt);
  for (const session of byLastUse.slice(0, Math.max(0, live.length - limits.maxPerHost + 1))) retire.push({ id: session.id, reason: 'room' });
  return { kind: 'create', retire };
}
