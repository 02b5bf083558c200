import { randomBytes } from 'node:crypto';
import { type Keys, type RedisClient, runScript } from '@crawlfleet/core';
import { Cookie, CookieJar } from 'tough-cookie';
import { chooseSession, type RetireReason, type SessionLimits, type SessionRecord } from './session-choice.js';

/** How many times a take reads again when another fetcher changed the host's sessions meanwhile. */
const MAX_TAKE_ROUNDS = 20;

/** The fixed part of a session, as kept in Redis. */
interface SessionFixed {
  proxy: string;
  profile: string;
  createdAt: number;
}

/** Pure: the host's sessions from their hash (see applySessionChoice-v.lua), and its version. */
export function sessionsFromHash(hash: Record<string, string>): { version: string; sessions: SessionRecord[] } {
  const sessions: SessionRecord[] = [];
  for (const [field, value] of Object.entries(hash)) {
    if (field === '#v' || field.includes(':')) continue;
    const fixed = JSON.parse(value) as SessionFixed;
    sessions.push({ id: field, ...fixed, uses: Number(hash[`${field}:uses`] ?? 0), lastUsedAt: Number(hash[`${field}:last`] ?? fixed.createdAt) });
  }
  return { version: hash['#v'] ?? '0', sessions };
}

/** A session as a request holds it: the host it belongs to, and what the store needs to reach it. */
export interface HeldSession extends SessionRecord {
  host: string;
}

/**
 * The fleet's sessions in Redis (issue #30): every fetcher and renderer takes a host's session from
 * here, so a host sees one identity per proxy for many requests, whichever process sends them, and
 * the session's cookies go with it. The decisions are chooseSession's (session-choice.ts); this class
 * reads, applies them atomically (applySessionChoice-v.lua), and keeps the cookies, one Redis hash per
 * session, read and written with tough-cookie's RFC 6265 rules.
 */
export class SessionStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly limits: SessionLimits,
  ) {}

  /**
   * The session for one request to `host` through `proxy` ('' for none): the proxy's session of the
   * host, or a new one with `profile()` as its browser profile. Also returns the sessions that retired
   * on the way, with their reasons, for the metrics.
   */
  async take(host: string, proxy: string, profile: () => string): Promise<{ session: HeldSession; retired: Array<{ id: string; reason: RetireReason }> }> {
    const k = this.keys.polite();
    for (let round = 0; round < MAX_TAKE_ROUNDS; round++) {
      const [hash, now] = await this.readSessions(host);
      const { version, sessions } = sessionsFromHash(hash);
      const choice = chooseSession(sessions, proxy, now, this.limits);
      const id = choice.kind === 'reuse' ? choice.session.id : randomBytes(9).toString('base64url');
      const fixed: SessionFixed = choice.kind === 'reuse' ? choice.session : { proxy, profile: profile(), createdAt: now };
      const uses = await runScript<number>(
        this.redis,
        'applySessionChoice',
        [k.sessions(host), ...choice.retire.map((r) => k.sessionCookies(host, r.id))],
        [version, choice.kind, id, choice.kind === 'create' ? JSON.stringify(fixed) : '', now, this.limits.maxUses, this.limits.maxAgeMs * 2, ...choice.retire.map((r) => r.id)],
      );
      if (uses > 0) return { session: { id, host, proxy: fixed.proxy, profile: fixed.profile, createdAt: fixed.createdAt, uses, lastUsedAt: now }, retired: choice.retire };
    }
    throw new Error(`could not take a session for ${host}: its sessions changed under ${MAX_TAKE_ROUNDS} reads in a row`);
  }

  /** Retires a session now (a block): it and its cookies are gone for every fetcher. True if it was alive. */
  async retire(session: HeldSession): Promise<boolean> {
    const k = this.keys.polite();
    const results = await this.redis
      .multi()
      .hdel(k.sessions(session.host), session.id, `${session.id}:uses`, `${session.id}:last`)
      .del(k.sessionCookies(session.host, session.id))
      .hincrby(k.sessions(session.host), '#v', 1)
      .exec();
    return Number(results?.[0]?.[1] ?? 0) > 0;
  }

  /** The Cookie header the session sends to `url`, or '' for none. */
  async cookieHeader(session: HeldSession, url: string): Promise<string> {
    const stored = await this.redis.hvals(this.keys.polite().sessionCookies(session.host, session.id));
    if (stored.length === 0) return '';
    const jar = new CookieJar();
    for (const json of stored) {
      const cookie = Cookie.fromJSON(json);
      if (cookie) await jar.store.putCookie(cookie);
    }
    return jar.getCookieString(url);
  }

  /** Keeps what a response's Set-Cookie headers set, by RFC 6265's rules for `url`; an expired cookie is deleted. */
  async storeCookies(session: HeldSession, url: string, setCookies: readonly string[]): Promise<void> {
    if (setCookies.length === 0) return;
    const key = this.keys.polite().sessionCookies(session.host, session.id);
    const jar = new CookieJar();
    const writes = this.redis.multi();
    for (const header of setCookies) {
      const cookie = await jar.setCookie(header, url, { ignoreError: true });
      if (!cookie) continue;
      const field = `${cookie.domain};${cookie.path};${cookie.key}`;
      if (cookie.TTL() <= 0) writes.hdel(key, field);
      else writes.hset(key, field, JSON.stringify(cookie.toJSON()));
    }
    writes.pexpire(key, this.limits.maxAgeMs * 2);
    await writes.exec();
  }

  /** The host's sessions hash and Redis TIME (ms), in one round trip: the fleet's one clock. */
  private async readSessions(host: string): Promise<[Record<string, string>, number]> {
    const results = await this.redis.pipeline().hgetall(this.keys.polite().sessions(host)).time().exec();
    const hash = (results?.[0]?.[1] as Record<string, string> | undefined) ?? {};
    const [seconds, micros] = (results?.[1]?.[1] as [string, string] | undefined) ?? ['0', '0'];
    return [hash, Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)];
  }
}
