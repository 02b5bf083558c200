import got, { type Agents, type CancelableRequest, type OptionsOfBufferResponseBody, type Response } from 'got';
import { NonRetryableError, RetryableError, causeChain, type Spider, type WireCapture } from '@crawlfleet/core';
import { encodeBody } from './body-codec.js';
import { redirectTarget } from './redirect.js';
import { lookup as dnsLookup } from 'node:dns';
import { type AddressPolicy, addressPolicy, assertUrlAddressAllowed, ForbiddenAddressError, guardLookup, type Lookup } from './address-guard.js';
import { identityHeaders } from './user-agents.js';
import { decodeContentEncoding } from './content-encoding.js';

/**
 * The exchange as it went over the wire, for WARC output: the request's head as sent, the response's
 * status line and header lines as received, and its body before any Content-Encoding was undone.
 * Node has removed the chunked framing, so a `Transfer-Encoding` line is left out of the head.
 */
export interface WireExchange {
  requestHead: string;
  responseHead: string;
  body: Buffer;
  /** the address the response came from (the proxy's, through one) */
  ip?: string;
}

export interface FetchResult {
  /** the URL after redirects */
  url: string;
  status: number;
  headers: Record<string, string | string[] | undefined>;
  contentType: string | undefined;
  body: Buffer;
  elapsedMs: number;
  /** redirects followed inside this request */
  redirects: number;
  /** the exchange as on the wire, when asked for (FetchOptions.keepWire) */
  wire?: WireExchange;
  /** a rendered page: the requests its browser made to the page's own host besides the navigation */
  hostRequests?: number;
}

/** What a single request needs of a spider. */
export interface FetchSettings {
  allowPrivateAddresses: boolean;
  /** private ranges the guard lets through all the same (CIDR or single addresses) */
  allowedAddresses?: readonly string[];
  limits: Pick<Spider['limits'], 'maxResponseBytes' | 'timeoutMs' | 'maxRedirects'>;
}

export interface FetchOptions {
  userAgent: string;
  agent?: Agents;
  signal?: AbortSignal;
  /**
   * resolves names in place of DNS (HOST_RESOLVE); the spider's address policy vets its answers
   * all the same. A proxy agent receives it too, and tunnels to the address it vetted.
   */
  lookup?: Lookup;
  /** a cap below the spider's, for robots.txt and probes */
  maxResponseBytes?: number;
  /**
   * which redirects to follow inside this request (default: all, up to maxRedirects); a redirect not
   * followed is returned as the response, for the caller to handle
   */
  followRedirect?: (from: URL, to: URL) => boolean;
  /** a code spider's request hook: method, extra headers (over the defaults) and body */
  request?: HttpRequestShape;
  /** keep the exchange as on the wire (WARC output): the body is then decoded here, not by got */
  keepWire?: boolean;
  /** the identity headers to send (a session's, the same from every fetcher) in place of those of `userAgent`'s browser */
  identityHeaders?: Record<string, string>;
  /**
   * the cookies of the request's session (got's cookieJar, tough-cookie's shape): asked for the
   * Cookie header of every hop, told each hop's Set-Cookie
   */
  cookieJar?: { getCookieString(url: string): Promise<string>; setCookie(rawCookie: string, url: string): Promise<unknown> };
}

/** What a request hook changes in one request (see request-hook.ts). */
export interface HttpRequestShape {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  headers: Record<string, string>;
  body?: string;
  /** Set-Cookie lines the request's session keeps, as if the site had set them (before this request) */
  setCookies?: string[];
}

function findForbidden(err: unknown): ForbiddenAddressError | undefined {
  for (const e of causeChain(err)) if (e instanceof ForbiddenAddressError) return e;
  return undefined;
}

/**
 * One GET with got, under the spider's limits: timeouts on every phase, a redirect cap, a size cap on
 * the decompressed body, and the SSRF guard on the first request, every redirect and every DNS answer
 * (also through a proxy: its agent tunnels to the address the guard vetted, see proxy-agent.ts).
 * got's own retries are off: BullMQ attempts own retrying, so the two never stack.
 *
 * Its steps: vet the address → got's options → the request, its body capped → the page, or the
 * error named for what the caller should do.
 */
export async function fetchPage(url: string, spider: FetchSettings, options: FetchOptions): Promise<FetchResult> {
  const policy = addressPolicy(spider);
  const limits = requestLimits(spider.limits, options.maxResponseBytes);
  const lookup = policy.allowPrivate ? options.lookup : guardLookup(options.lookup ?? (dnsLookup as unknown as Lookup), policy);
  assertUrlAddressAllowed(new URL(url), policy);
  const started = performance.now();
  const request = got(url, gotOptions(options, limits, lookup, policy));
  const tooLarge = capBodySize(request, limits.maxResponseBytes);
  try {
    return pageOf(await request, url, options, limits.maxResponseBytes, started);
  } catch (err) {
    throw requestError(err, tooLarge(), limits.maxResponseBytes, url);
  }
}

type RequestLimits = FetchSettings['limits'];

/** Pure: the spider's limits for one request, its size cap lowered to the caller's (robots.txt, probes). */
export function requestLimits(limits: RequestLimits, maxResponseBytes: number | undefined): RequestLimits {
  return maxResponseBytes ? { ...limits, maxResponseBytes: Math.min(maxResponseBytes, limits.maxResponseBytes) } : limits;
}

/** got's options for one request: the hook's shape, no retries nor cache, the redirect rule, phase timeouts, the guard on every redirect. */
function gotOptions(options: FetchOptions, limits: RequestLimits, lookup: Lookup | undefined, policy: AddressPolicy): OptionsOfBufferResponseBody {
  const shape = options.request;
  return {
    ...(shape ? { method: shape.method, ...(shape.body !== undefined ? { body: shape.body } : {}) } : {}),
    responseType: 'buffer',
    throwHttpErrors: false,
    retry: { limit: 0 },
    followRedirect: options.followRedirect
      ? (response) => {
          const to = redirectTarget(response.headers.location, response.url);
          return to !== undefined && options.followRedirect!(new URL(response.url), to);
        }
      : true,
    maxRedirects: limits.maxRedirects,
    decompress: !options.keepWire,
    http2: false,
    cache: false,
    ...(options.agent ? { agent: options.agent } : {}),
    ...(lookup ? { dnsLookup: lookup as never } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.cookieJar ? { cookieJar: options.cookieJar } : {}),
    timeout: {
      lookup: Math.min(10_000, limits.timeoutMs),
      connect: Math.min(10_000, limits.timeoutMs),
      secureConnect: Math.min(10_000, limits.timeoutMs),
      send: limits.timeoutMs,
      response: limits.timeoutMs,
      request: limits.timeoutMs,
    },
    headers: { ...(options.identityHeaders ?? identityHeaders(options.userAgent)), ...shape?.headers },
    hooks: {
      beforeRedirect: [
        (next) => assertUrlAddressAllowed(next.url as URL, policy),
        // got keeps the last hop's Cookie header when the jar has nothing for the next: a cookie the
        // redirect deleted, or one of another path, would go on. The jar alone decides each hop's.
        ...(options.cookieJar ? [(next: { headers: Record<string, unknown> }) => void delete next.headers.cookie] : []),
      ],
    },
  };
}

/** Cancels the request once its body passes the cap (got counts decompressed bytes); the answer says whether it did. */
function capBodySize(request: CancelableRequest<Response<Buffer>>, maxResponseBytes: number): () => boolean {
  let tooLarge = false;
  request.on('downloadProgress', (progress: { transferred: number; total?: number }) => {
    if (progress.transferred > maxResponseBytes || (progress.total ?? 0) > maxResponseBytes) {
      tooLarge = true;
      request.cancel();
    }
  });
  return () => tooLarge;
}

/** The response as a FetchResult: its body decoded here when the wire is kept, and the exchange with it. */
function pageOf(response: Response<Buffer>, url: string, options: FetchOptions, maxResponseBytes: number, started: number): FetchResult {
  const body = options.keepWire ? decodeContentEncoding(response.body, response.headers['content-encoding'], maxResponseBytes, url) : response.body;
  return {
    url: response.url,
    status: response.statusCode,
    headers: response.headers,
    contentType: response.headers['content-type'],
    body,
    ...(options.keepWire ? { wire: wireExchange(response as unknown as RawResponse) } : {}),
    elapsedMs: performance.now() - started,
    redirects: response.redirectUrls.length,
  };
}

/**
 * Pure: the error a failed request throws, named for what the caller should do: ours as they are,
 * a body over the cap and the SSRF guard's refusal as such, a code no attempt can change as
 * NonRetryableError, and anything else as RetryableError.
 */
export function requestError(err: unknown, tooLarge: boolean, maxResponseBytes: number, url: string): Error {
  if (err instanceof NonRetryableError || err instanceof RetryableError) return err;
  if (tooLarge) {
    return new NonRetryableError('ERR_RESPONSE_TOO_LARGE', `response larger than ${maxResponseBytes} bytes`, { url }, { cause: err });
  }
  const forbidden = findForbidden(err);
  if (forbidden) return forbidden;
  const code = (err as { code?: string }).code ?? 'ERR_UNKNOWN';
  const message = `${code}: ${(err as Error).message}`;
  if (code === 'ERR_TOO_MANY_REDIRECTS' || code === 'ENOTFOUND' || code === 'ERR_INVALID_URL' || code === 'ERR_UNSUPPORTED_PROTOCOL') {
    return new NonRetryableError(code, message, { url }, { cause: err });
  }
  // Timeouts, resets, refused connections and broken bodies: another attempt may succeed.
  return new RetryableError(code, message, { url }, { cause: err });
}

/** A fetched page's exchange as job data (WireCapture): what the writers archive. */
export function captureOf(page: FetchResult, date: string): WireCapture | undefined {
  if (!page.wire) return undefined;
  const { requestHead, responseHead, body, ip } = page.wire;
  return { targetUri: page.url, date, requestHead, responseHead, body: encodeBody(body), ...(ip ? { ip } : {}) };
}

interface RawResponse {
  httpVersion: string;
  statusCode: number;
  statusMessage?: string;
  rawHeaders: string[];
  body: Buffer;
  ip?: string;
  req?: { _header?: unknown; method?: string; path?: string; getHeader?(name: string): unknown };
}

/** The request head Node sent (its own serialisation, so exactly the bytes on the wire) and the response head as received. */
function wireExchange(response: RawResponse): WireExchange {
  const lines = [`HTTP/${response.httpVersion} ${response.statusCode}${response.statusMessage ? ` ${response.statusMessage}` : ''}`];
  for (let i = 0; i + 1 < response.rawHeaders.length; i += 2) {
    if (response.rawHeaders[i]!.toLowerCase() === 'transfer-encoding') continue;
    lines.push(`${response.rawHeaders[i]}: ${response.rawHeaders[i + 1]}`);
  }
  const sent = response.req?._header;
  const requestHead = typeof sent === 'string' ? sent : `${response.req?.method ?? 'GET'} ${response.req?.path ?? '/'} HTTP/1.1\r\n\r\n`;
  return { requestHead, responseHead: `${lines.join('\r\n')}\r\n\r\n`, body: response.body, ...(response.ip ? { ip: response.ip } : {}) };
}
