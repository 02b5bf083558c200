import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Keys, type RedisClient, runScript } from '@crawlfleet/core';
import { Cookie, CookieJar } from 'tough-cookie';
import { chooseSession, type RetireReason, type SessionLimits, type SessionRecord, sessionLimitsProblem } from './session-choice.js';

/** How many times a take reads again when another fetcher began or retired a session meanwhile. */
const MAX_TAKE_ROUNDS = 20;
/** A cookie longer than browsers keep (name and value) is not kept. */
export const MAX_COOKIE_BYTES = 4096;
/** Cookies one session keeps at most: Chromium's limit per domain. */
export const MAX_COOKIES_PER_SESSION = 180;

/** The fixed part of a session, as kept in Redis; its times are fields of their own. */
interface SessionFixed {
  proxy: string;
  profile: string;
}

/** Pure: the host's sessions from their hash (see applySessionChoice-v.lua), and its version. */
export function sessionsFromHash(hash: Record<string, string>): { version: string; sessions: SessionRecord[] } {
  const sessions: SessionRecord[] = [];
  for (const [field, value] of Object.entries(hash)) {
    if (field === '#v' || field.includes(':')) continue;
    const fixed = JSON.parse(value) as SessionFixed;
    const createdAt = Number(hash[`${field}:created`] ?? 0);
    sessions.push({ id: field, proxy: fixed.proxy, profile: fixed.profile, createdAt, uses: Number(hash[`${field}:uses`] ?? 0), lastUsedAt: Number(hash[`${field}:last`] ?? createdAt) });
  }
  return { version: hash['#v'] ?? '0', sessions };
}

/** A session as a request holds it: the host it belongs to, and what the store needs to reach it. */
export interface HeldSession extends SessionRecord {
  host: string;
  /** how long its hashes outlive their last change: twice its limits' maxAgeMs */
  ttlMs: number;
}

/** A session as a code spider's request hook sees it: its id, its User-Agent, and its cookies for the URL (name -> value). */
export interface SessionView {
  id: string;
  userAgent: string;
  cookies: Record<string, string>;
}

/** One take: the session, the sessions it retired (with why), and whether it began this session. */
export interface SessionTake {
  session: HeldSession;
  retired: Array<{ id: string; reason: RetireReason }>;
  began: boolean;
}

/** What a request's client asks of its session's cookies, in got's `cookieJar` shape (tough-cookie's). */
export interface SessionCookieJar {
  getCookieString(url: string): Promise<string>;
  setCookie(rawCookie: string, url: string): Promise<unknown>;
}

/**
 * The fleet's sessions in Redis (issue #30): every fetcher and renderer takes a host's session from
 * here, so a host sees one identity per proxy for many requests, whichever process sends them, and
 * the session's cookies go with it. The decisions are chooseSession's (session-choice.ts); this class
 * reads, applies them atomically (applySessionChoice-v.lua), and keeps the cookies, one Redis hash per
 * session, parsed and matched with tough-cookie's RFC 6265 rules (storeSessionCookies-2.lua).
 */
export class SessionStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly limits: SessionLimits,
  ) {
    const problem = sessionLimitsProblem(limits);
    if (problem) throw new Error(problem);
  }

  /** How long a host's hashes outlive their last change: a session is dead after maxAgeMs anyway. */
  private static ttlMs(limits: SessionLimits): number {
    return limits.maxAgeMs * 2;
  }

  /**
   * The session for one request to `host` through `proxy` ('' for none): the proxy's session of the
   * host, or a new one with `profile()` as its browser profile. Also returns the sessions this take
   * retired, with their reasons, for the metrics (each retirement is reported by one take only), and
   * whether it began the session. Another fetcher beginning or retiring a session of the host
   * meanwhile makes it read again, after a short random pause. `limits` are the spider's (the
   * store's own by default).
   */
  async take(host: string, proxy: string, profile: () => string, limits: SessionLimits = this.limits): Promise<SessionTake> {
    const k = this.keys.polite();
    const ttlMs = SessionStore.ttlMs(limits);
    for (let round = 0; round < MAX_TAKE_ROUNDS; round++) {
      if (round > 0) await sleep(Math.random() * 2 ** Math.min(round, 6));
      const [hash, now] = await this.readSessions(host);
      const { version, sessions } = sessionsFromHash(hash);
      const choice = chooseSession(sessions, proxy, now, limits);
      const id = choice.kind === 'reuse' ? choice.session.id : randomBytes(9).toString('base64url');
      const fixed: SessionFixed = choice.kind === 'reuse' ? choice.session : { proxy, profile: profile() };
      const [uses, at, ...removed] = await runScript<[number, number, ...string[]]>(
        this.redis,
        'applySessionChoice',
        [k.sessions(host), ...choice.retire.map((r) => k.sessionCookies(host, r.id))],
        [version, choice.kind, id, choice.kind === 'create' ? JSON.stringify(fixed) : '', limits.maxUses, ttlMs, ...choice.retire.map((r) => r.id)],
      );
      if (uses > 0) {
        const createdAt = choice.kind === 'reuse' ? choice.session.createdAt : at;
        const retired = choice.retire.filter((r) => removed.includes(r.id));
        const session: HeldSession = { id, host, proxy: fixed.proxy, profile: fixed.profile, createdAt, uses, lastUsedAt: at, ttlMs };
        await this.index(host, choice.kind === 'create' ? { id, endsAt: createdAt + limits.maxAgeMs } : undefined, retired);
        return { session, retired, began: choice.kind === 'create' };
      }
    }
    throw new Error(`could not take a session for ${host}: its sessions changed under ${MAX_TAKE_ROUNDS} reads in a row`);
  }

  /** Retires a session now (a block): it and its cookies are gone for every fetcher. True if it was alive. */
  async retire(session: HeldSession): Promise<boolean> {
    const k = this.keys.polite();
    const alive = (await runScript<number>(this.redis, 'retireSession', [k.sessions(session.host), k.sessionCookies(session.host, session.id)], [session.id, session.ttlMs])) === 1;
    await this.index(session.host, undefined, [session]);
    return alive;
  }

  /**
   * The fleet's sessions alive now (begun, not retired, not past their age). Kept apart from the
   * hosts' hashes, which live on many slots, by each take and retire after its script: a process that
   * dies between the two leaves an entry that its age removes.
   */
  async alive(): Promise<number> {
    const key = this.keys.polite().sessionsAlive;
    const results = await this.redis.multi().zremrangebyscore(key, '-inf', `(${Date.now()}`).zcard(key).exec();
    return Number(results?.[1]?.[1] ?? 0);
  }

  /** The sessions-alive index after a take or a retire: the session begun (with its end by age) in, the retired out. */
  private async index(host: string, begun: { id: string; endsAt: number } | undefined, retired: readonly { id: string }[]): Promise<void> {
    if (!begun && retired.length === 0) return;
    const key = this.keys.polite().sessionsAlive;
    const pipeline = this.redis.pipeline();
    if (begun) pipeline.zadd(key, begun.endsAt, `${host} ${begun.id}`);
    if (retired.length > 0) pipeline.zrem(key, ...retired.map((r) => `${host} ${r.id}`));
    await pipeline.exec();
  }

  /**
   * The session's cookies as a request's client uses them (got's `cookieJar`): what the session
   * sends to each URL of the request (each redirect too), and what each response sets kept for the
   * fleet. `extra` is a Cookie header of the request's own (a request hook's), sent after the session's.
   */
  jar(session: HeldSession, extra?: string): SessionCookieJar {
    return {
      getCookieString: async (url) => [await this.cookieHeader(session, url), extra].filter(Boolean).join('; '),
      setCookie: (rawCookie, url) => this.storeCookies(session, url, [rawCookie]),
    };
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

  /** The cookies the session sends to `url`, name -> value (a request hook's view). */
  async cookiesFor(session: HeldSession, url: string): Promise<Record<string, string>> {
    const header = await this.cookieHeader(session, url);
    const cookies: Record<string, string> = {};
    for (const pair of header ? header.split('; ') : []) {
      const at = pair.indexOf('=');
      cookies[at < 0 ? '' : pair.slice(0, at)] = at < 0 ? pair : pair.slice(at + 1);
    }
    return cookies;
  }

  /**
   * Keeps what a response's Set-Cookie headers set, by RFC 6265's rules for `url`: a cookie for
   * another domain, a Secure one from http, or one over MAX_COOKIE_BYTES is refused; an expired one is
   * deleted. Returns false when the session has retired meanwhile (nothing is kept).
   */
  async storeCookies(session: HeldSession, url: string, setCookies: readonly string[]): Promise<boolean> {
    if (setCookies.length === 0) return true;
    const jar = new CookieJar();
    const changes: string[] = [];
    for (const header of setCookies) {
      const cookie = await jar.setCookie(header, url, { ignoreError: true });
      if (!cookie || cookie.key.length + cookie.value.length > MAX_COOKIE_BYTES) continue;
      const field = `${cookie.domain};${cookie.path};${cookie.key}`;
      if (cookie.TTL() <= 0) changes.push(field, 'del', '');
      else changes.push(field, 'set', JSON.stringify(cookie.toJSON()));
    }
    if (changes.length === 0) return true;
    const k = this.keys.polite();
    const secure = new URL(url).protocol === 'https:' ? '1' : '0';
    const changed = await runScript<number>(
      this.redis,
      'storeSessionCookies',
      [k.sessions(session.host), k.sessionCookies(session.host, session.id)],
      [session.id, session.ttlMs, secure, MAX_COOKIES_PER_SESSION, ...changes],
    );
    return changed >= 0;
  }

  /** The host's sessions hash and Redis TIME (ms), in one round trip: the fleet's one clock. */
  private async readSessions(host: string): Promise<[Record<string, string>, number]> {
    const results = await this.redis.pipeline().hgetall(this.keys.polite().sessions(host)).time().exec();
    const hash = (results?.[0]?.[1] as Record<string, string> | undefined) ?? {};
    const [seconds, micros] = (results?.[1]?.[1] as [string, string] | undefined) ?? ['0', '0'];
    return [hash, Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)];
  }
}
