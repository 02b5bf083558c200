import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { causeChain, type Keys, type RedisClient, runScript } from '@crawlfleet/core';
import { Cookie, CookieJar } from 'tough-cookie';
import { chooseSession, type RetireReason, type SessionLimits, type SessionRecord, sessionLimitsProblem } from './session-choice.js';

/** How many times a take reads again when another fetcher began or retired a session meanwhile. */
const MAX_TAKE_ROUNDS = 20;
/** A cookie longer than browsers keep (name and value) is not kept. */
export const MAX_COOKIE_BYTES = 4096;
/** An attribute longer than browsers keep (RFC 6265bis: 1024 bytes; a path, a domain) refuses its cookie. */
const MAX_COOKIE_ATTRIBUTE_BYTES = 1024;
/** Cookies one session keeps at most: Chromium's limit per domain. */
export const MAX_COOKIES_PER_SESSION = 180;
/** What a Cookie header may carry (Node refuses other characters in a header, and would fail every request of the session). */
const COOKIE_TEXT = /^[\x20-\x7e]*$/;

/** Who a session is to the site: the User-Agent and the whole header set that goes with it, fixed for its life. */
export interface SessionProfile {
  userAgent: string;
  headers: Record<string, string>;
}

/** The fixed part of a session, as kept in Redis; its times are fields of their own. */
interface SessionFixed {
  proxy: string;
  profile: string;
  headers?: Record<string, string>;
}

/** Where a session lives: its host, and its scope (the crawl: a crawl's identities and cookies are its own). */
export interface SessionPlace {
  host: string;
  scope: string;
}

/** Pure: the host's sessions from their hash (see applySessionChoice-v.lua), and its version. */
export function sessionsFromHash(hash: Record<string, string>): { version: string; sessions: SessionRecord[] } {
  const sessions: SessionRecord[] = [];
  for (const [field, value] of Object.entries(hash)) {
    if (field === '#v' || field.includes(':')) continue;
    const fixed = JSON.parse(value) as SessionFixed;
    const createdAt = Number(hash[`${field}:created`] ?? 0);
    sessions.push({
      id: field,
      proxy: fixed.proxy,
      profile: fixed.profile,
      ...(fixed.headers ? { headers: fixed.headers } : {}),
      createdAt,
      uses: Number(hash[`${field}:uses`] ?? 0),
      lastUsedAt: Number(hash[`${field}:last`] ?? createdAt),
    });
  }
  return { version: hash['#v'] ?? '0', sessions };
}

/** A session as a request holds it: where it lives, and what the store needs to reach it. */
export interface HeldSession extends SessionRecord, SessionPlace {
  /** how long its hashes outlive their last change: twice its limits' maxAgeMs */
  ttlMs: number;
}

/** A session as a request hook is told of it: its id, its User-Agent, and (read on demand) its cookies for the URL, name -> value. */
export interface SessionView {
  id: string;
  userAgent: string;
  cookies: () => Promise<Record<string, string>>;
}

/** A failure of the session store under a request (Redis, reading or keeping its cookies): the fleet's, not the site's. */
export class SessionStoreError extends Error {
  constructor(cause: unknown) {
    super(`the session's cookies could not be read or kept: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'SessionStoreError';
  }
}

/** Pure: was this failure (or one it wraps, as got wraps its cookie jar's) the session store's? */
export function isSessionFault(err: unknown): boolean {
  for (const e of causeChain(err)) if (e instanceof SessionStoreError) return true;
  return false;
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
   * The session for one request to a host (in one scope) through `proxy` ('' for none): the proxy's
   * session there, or a new one with `profile()` as who it is. Also returns the sessions this take
   * retired, with their reasons, for the metrics (each retirement is reported by one take only), and
   * whether it began the session. Another fetcher beginning or retiring a session of the host
   * meanwhile makes it read again, after a short random pause. `limits` are the spider's (the
   * store's own by default).
   */
  async take(place: SessionPlace, proxy: string, profile: () => SessionProfile, limits: SessionLimits = this.limits): Promise<SessionTake> {
    const k = this.keys.polite();
    const ttlMs = SessionStore.ttlMs(limits);
    for (let round = 0; round < MAX_TAKE_ROUNDS; round++) {
      if (round > 0) await sleep(Math.random() * 2 ** Math.min(round, 6));
      const [hash, now] = await this.readSessions(place);
      const { version, sessions } = sessionsFromHash(hash);
      const choice = chooseSession(sessions, proxy, now, limits);
      const id = choice.kind === 'reuse' ? choice.session.id : randomBytes(9).toString('base64url');
      const fixed: SessionFixed = choice.kind === 'reuse' ? choice.session : fixedOf(proxy, profile());
      const [uses, at, ...removed] = await runScript<[number, number, ...string[]]>(
        this.redis,
        'applySessionChoice',
        [k.sessions(place.host, place.scope), k.sessionsAlive(place.host), ...choice.retire.map((r) => k.sessionCookies(place.host, place.scope, r.id))],
        [version, choice.kind, id, choice.kind === 'create' ? JSON.stringify(fixed) : '', limits.maxUses, ttlMs, aliveMember(place, ''), limits.maxAgeMs, ...choice.retire.map((r) => r.id)],
      );
      if (uses > 0) {
        const createdAt = choice.kind === 'reuse' ? choice.session.createdAt : at;
        const retired = choice.retire.filter((r) => removed.includes(r.id));
        const session: HeldSession = { ...place, id, proxy: fixed.proxy, profile: fixed.profile, ...(fixed.headers ? { headers: fixed.headers } : {}), createdAt, uses, lastUsedAt: at, ttlMs };
        return { session, retired, began: choice.kind === 'create' };
      }
    }
    throw new Error(`could not take a session for ${place.host}: its sessions changed under ${MAX_TAKE_ROUNDS} reads in a row`);
  }

  /** Retires a session now (a block): it and its cookies are gone for every fetcher. True if it was alive. */
  async retire(session: HeldSession): Promise<boolean> {
    const k = this.keys.polite();
    const keys = [k.sessions(session.host, session.scope), k.sessionCookies(session.host, session.scope, session.id), k.sessionsAlive(session.host)];
    return (await runScript<number>(this.redis, 'retireSession', keys, [session.id, session.ttlMs, aliveMember(session, session.id)])) === 1;
  }

  /**
   * The fleet's sessions alive now: begun, not retired, within their age (one used up counts until
   * the next take of its host retires it). Each politeness slot keeps its own set, changed by the
   * same scripts that begin and retire sessions.
   */
  async alive(now = Date.now()): Promise<number> {
    const counts = await Promise.all(
      this.keys
        .polite()
        .allSessionsAlive()
        .map((key) => this.redis.zcount(key, `(${now}`, '+inf')),
    );
    return counts.reduce((sum, n) => sum + n, 0);
  }

  /**
   * The session's cookies as a request's client uses them (got's `cookieJar`): what the session
   * sends to each URL of the request (each redirect too), and what each response sets kept for the
   * fleet. `own` is the request's own Cookie header (a request hook's) for URLs of `origin`: its
   * cookies go after the session's, and take the place of the session's of the same name.
   */
  jar(session: HeldSession, own?: { cookie: string; origin: string }): SessionCookieJar {
    return {
      getCookieString: async (url) => {
        const header = await this.cookieHeader(session, url).catch((err: unknown) => Promise.reject(new SessionStoreError(err)));
        return own && new URL(url).origin === own.origin ? withOwnCookies(header, own.cookie) : header;
      },
      setCookie: (rawCookie, url) => this.storeCookies(session, url, [rawCookie]).catch((err: unknown) => Promise.reject(new SessionStoreError(err))),
    };
  }

  /** The Cookie header the session sends to `url`, or '' for none; cookies past their expiry are dropped from Redis on the way. */
  async cookieHeader(session: HeldSession, url: string): Promise<string> {
    const key = this.keys.polite().sessionCookies(session.host, session.scope, session.id);
    const stored = await this.redis.hgetall(key);
    const jar = new CookieJar();
    const expired: string[] = [];
    for (const [field, json] of Object.entries(stored)) {
      const cookie = Cookie.fromJSON(json);
      if (!cookie) continue;
      if (cookie.TTL() <= 0) expired.push(field);
      else await jar.store.putCookie(cookie);
    }
    if (expired.length > 0) await this.redis.hdel(key, ...expired);
    return jar.getCookieString(url);
  }

  /** The cookies the session sends to `url`, name -> value (a request hook's view); of two with one name, the first (the more specific path). */
  async cookiesFor(session: HeldSession, url: string): Promise<Record<string, string>> {
    return cookiePairs(await this.cookieHeader(session, url));
  }

  /**
   * Keeps what a response's Set-Cookie headers set, by RFC 6265's rules for `url`: a cookie for
   * another domain, a Secure one from http, one over MAX_COOKIE_BYTES, one with an attribute over
   * 1024 bytes or with characters a Cookie header cannot carry is refused; an expired one is deleted.
   * Unknown attributes are not kept. Returns false when the session has retired meanwhile (nothing is kept).
   */
  async storeCookies(session: HeldSession, url: string, setCookies: readonly string[]): Promise<boolean> {
    if (setCookies.length === 0) return true;
    const jar = new CookieJar();
    const changes: string[] = [];
    for (const header of setCookies) {
      const cookie = await jar.setCookie(header, url, { ignoreError: true });
      if (!cookie || cookieProblem(cookie)) continue;
      cookie.extensions = null;
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
      [k.sessions(session.host, session.scope), k.sessionCookies(session.host, session.scope, session.id)],
      [session.id, session.ttlMs, secure, MAX_COOKIES_PER_SESSION, ...changes],
    );
    return changed >= 0;
  }

  /** The host's sessions hash (in its scope) and Redis TIME (ms), in one round trip: the fleet's one clock. */
  private async readSessions(place: SessionPlace): Promise<[Record<string, string>, number]> {
    const results = await this.redis.pipeline().hgetall(this.keys.polite().sessions(place.host, place.scope)).time().exec();
    const hash = (results?.[0]?.[1] as Record<string, string> | undefined) ?? {};
    const [seconds, micros] = (results?.[1]?.[1] as [string, string] | undefined) ?? ['0', '0'];
    return [hash, Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)];
  }
}

/** Pure: a new session's fixed part. */
function fixedOf(proxy: string, profile: SessionProfile): SessionFixed {
  return { proxy, profile: profile.userAgent, headers: profile.headers };
}

/** Pure: a session's member of its slot's alive set: '<scope> <host> <id>'. */
function aliveMember(place: SessionPlace, id: string): string {
  return `${place.scope} ${place.host} ${id}`;
}

/** Pure: why a cookie a site set is not kept (too long, an attribute too long, characters a header cannot carry), or undefined. */
export function cookieProblem(cookie: { key: string; value: string; path?: string | null; domain?: string | null }): string | undefined {
  if (cookie.key.length + cookie.value.length > MAX_COOKIE_BYTES) return 'name and value over 4096 bytes';
  if ((cookie.path?.length ?? 0) > MAX_COOKIE_ATTRIBUTE_BYTES || (cookie.domain?.length ?? 0) > MAX_COOKIE_ATTRIBUTE_BYTES) return 'an attribute over 1024 bytes';
  if (!COOKIE_TEXT.test(cookie.key) || !COOKIE_TEXT.test(cookie.value)) return 'a character a Cookie header cannot carry';
  return undefined;
}

/** Pure: a Cookie header's pairs, name -> value; of two with one name, the first. */
export function cookiePairs(header: string): Record<string, string> {
  const cookies: Record<string, string> = Object.create(null);
  for (const pair of header ? header.split(/;\s*/) : []) {
    const at = pair.indexOf('=');
    const name = at < 0 ? '' : pair.slice(0, at);
    if (!(name in cookies)) cookies[name] = at < 0 ? pair : pair.slice(at + 1);
  }
  return cookies;
}

/** Pure: the session's Cookie header with a request's own cookies after it, each taking the place of the session's of the same name. */
export function withOwnCookies(session: string, own: string): string {
  const ownNames = new Set(Object.keys(cookiePairs(own)));
  const kept = session ? session.split(/;\s*/).filter((pair) => !ownNames.has(pair.slice(0, Math.max(0, pair.indexOf('='))))) : [];
  return [...kept, own].filter(Boolean).join('; ');
}
