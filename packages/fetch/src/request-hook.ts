import { SpiderHookError, withinHookDeadline, type LoadedSpiderModule, type Spider } from '@crawlfleet/core';
import type { HttpRequestShape } from './http-client.js';

// No HEAD: its empty body would be classified as a block page.
const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);
/** got sets these from the request itself; a hook that sets them would corrupt it */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection']);

/**
 * Pure: what a request hook returned, as the request to send; throws a plain Error naming the
 * problem when it is not one (the caller reports it as the hook's failure).
 */
export function requestShape(returned: unknown, options: { session?: boolean } = {}): HttpRequestShape | undefined {
  if (returned === undefined || returned === null) return undefined;
  if (typeof returned !== 'object' || Array.isArray(returned))
    throw new Error(`request hook must return an object ({ headers, cookies, setCookies, method, body }) or nothing, got ${Array.isArray(returned) ? 'an array' : typeof returned}`);
  const { method = 'GET', headers = {}, cookies, setCookies, body, ...rest } = returned as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new Error(`request hook returned unknown key(s) ${unknown.map((k) => JSON.stringify(k)).join(', ')}: use headers, cookies, setCookies, method or body`);
  if (typeof method !== 'string' || !METHODS.has(method.toUpperCase())) throw new Error(`request hook: method must be one of ${[...METHODS].join(', ')}, got ${JSON.stringify(method)}`);
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers as Record<string, unknown>)) {
    if (typeof value !== 'string') throw new Error(`request hook: header ${JSON.stringify(name)} must be a string`);
    const lower = name.toLowerCase();
    if (RESERVED_HEADERS.has(lower)) throw new Error(`request hook: header ${JSON.stringify(name)} is set by the fetcher`);
    out[lower] = value;
  }
  if (cookies !== undefined) {
    if (typeof cookies !== 'object' || cookies === null) throw new Error('request hook: cookies must be an object of name -> value');
    const pairs = Object.entries(cookies as Record<string, unknown>).map(([name, value]) => {
      if (typeof value !== 'string') throw new Error(`request hook: cookie ${JSON.stringify(name)} must be a string`);
      return `${name}=${value}`;
    });
    if (pairs.length > 0) out.cookie = out.cookie ? `${out.cookie}; ${pairs.join('; ')}` : pairs.join('; ');
  }
  let text: string | undefined;
  if (typeof body === 'string') text = body;
  else if (body !== undefined) {
    text = JSON.stringify(body);
    out['content-type'] ??= 'application/json';
  }
  const verb = method.toUpperCase() as HttpRequestShape['method'];
  if (text !== undefined && verb === 'GET') throw new Error('request hook: a GET request has no body; use method POST');
  const kept = sessionCookieLines(setCookies, options.session ?? false);
  return { method: verb, headers: out, ...(text !== undefined ? { body: text } : {}), ...(kept.length > 0 ? { setCookies: kept } : {}) };
}

/** Pure: a hook's `setCookies`, Set-Cookie lines for the request's session; throws when it is not a list of strings, or there is no session. */
function sessionCookieLines(setCookies: unknown, session: boolean): string[] {
  if (setCookies === undefined) return [];
  if (!Array.isArray(setCookies) || setCookies.some((line) => typeof line !== 'string')) throw new Error('request hook: setCookies must be a list of Set-Cookie lines ("name=value; Path=/")');
  const unsendable = (setCookies as string[]).find((line) => !/^[\x20-\x7e]+$/.test(line));
  if (unsendable !== undefined) throw new Error(`request hook: setCookies line ${JSON.stringify(unsendable.slice(0, 80))} has characters a Cookie header cannot carry (printable ASCII only)`);
  if (setCookies.length > 0 && !session) throw new Error('request hook: setCookies needs a session, and this spider keeps none (sessions.enabled is false); use cookies for this request alone');
  return setCookies as string[];
}

/**
 * Pure: a request whose hook's `setCookies` go with it as plain cookies, for a caller with no session
 * to keep them in (`crawlfleet shell`: its session lives for its one request).
 */
export function withSetCookiesSent(shape: HttpRequestShape | undefined): HttpRequestShape | undefined {
  if (!shape?.setCookies?.length) return shape;
  const { setCookies, ...rest } = shape;
  const pairs = setCookies.map((line) => line.split(';')[0]!.trim()).filter((pair) => pair.includes('='));
  return { ...rest, headers: { ...rest.headers, cookie: [rest.headers.cookie, ...pairs].filter(Boolean).join('; ') } };
}

/** Runs a code spider's request hook for one URL; a throw or a bad answer is the hook's failure (SpiderHookError). */
export async function runRequestHook(
  module: LoadedSpiderModule | undefined,
  url: string,
  ctx: { crawlId: string; spider: Spider; depth: number; meta: Record<string, unknown>; session?: { id: string; userAgent: string; cookies: Record<string, string> } },
): Promise<HttpRequestShape | undefined> {
  const hook = module?.code.request;
  if (!hook) return undefined;
  try {
    return requestShape(await withinHookDeadline(Promise.resolve(hook(url as never, ctx as never)), ctx.spider.limits.timeoutMs), { session: ctx.session !== undefined });
  } catch (err) {
    throw new SpiderHookError('request', err, module.locate(err));
  }
}
