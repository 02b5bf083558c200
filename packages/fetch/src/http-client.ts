import got, { type Agents } from 'got';
import { NonRetryableError, RetryableError, type Spider } from '@crawlfleet/core';
import { redirectTarget } from './redirect.js';
import { lookup as dnsLookup } from 'node:dns';
import { addressPolicy, assertUrlAddressAllowed, ForbiddenAddressError, guardLookup, type Lookup } from './address-guard.js';
import { identityHeaders } from './user-agents.js';

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
}

/** What a request hook changes in one request (see request-hook.ts). */
export interface HttpRequestShape {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  headers: Record<string, string>;
  body?: string;
}

function findForbidden(err: unknown): ForbiddenAddressError | undefined {
  for (let e = err as { cause?: unknown } | undefined, i = 0; e && i < 5; e = e.cause as typeof e, i++) {
    if (e instanceof ForbiddenAddressError) return e;
  }
  return undefined;
}

/**
 * One GET with got, under the spider's limits: timeouts on every phase, a redirect cap, a size cap on
 * the decompressed body, and the SSRF guard on the first request, every redirect and every DNS answer
 * (also through a proxy: its agent tunnels to the address the guard vetted, see proxy-agent.ts).
 * got's own retries are off: BullMQ attempts own retrying, so the two never stack.
 */
export async function fetchPage(url: string, spider: FetchSettings, options: FetchOptions): Promise<FetchResult> {
  const policy = addressPolicy(spider);
  const limits = options.maxResponseBytes ? { ...spider.limits, maxResponseBytes: Math.min(options.maxResponseBytes, spider.limits.maxResponseBytes) } : spider.limits;
  const lookup = policy.allowPrivate ? options.lookup : guardLookup(options.lookup ?? (dnsLookup as unknown as Lookup), policy);
  assertUrlAddressAllowed(new URL(url), policy);
  const started = performance.now();
  let tooLarge = false;
  const shape = options.request;
  const request = got(url, {
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
    decompress: true,
    http2: false,
    cache: false,
    ...(options.agent ? { agent: options.agent } : {}),
    ...(lookup ? { dnsLookup: lookup as never } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    timeout: {
      lookup: Math.min(10_000, limits.timeoutMs),
      connect: Math.min(10_000, limits.timeoutMs),
      secureConnect: Math.min(10_000, limits.timeoutMs),
      send: limits.timeoutMs,
      response: limits.timeoutMs,
      request: limits.timeoutMs,
    },
    headers: { ...identityHeaders(options.userAgent), ...shape?.headers },
    hooks: {
      beforeRedirect: [(next) => assertUrlAddressAllowed(next.url as URL, policy)],
    },
  });
  request.on('downloadProgress', (progress: { transferred: number; total?: number }) => {
    if (progress.transferred > limits.maxResponseBytes || (progress.total ?? 0) > limits.maxResponseBytes) {
      tooLarge = true;
      request.cancel();
    }
  });
  try {
    const response = await request;
    return {
      url: response.url,
      status: response.statusCode,
      headers: response.headers,
      contentType: response.headers['content-type'],
      body: response.body,
      elapsedMs: performance.now() - started,
      redirects: response.redirectUrls.length,
    };
  } catch (err) {
    if (tooLarge) {
      throw new NonRetryableError('ERR_RESPONSE_TOO_LARGE', `response larger than ${limits.maxResponseBytes} bytes`, { url }, { cause: err });
    }
    const forbidden = findForbidden(err);
    if (forbidden) throw forbidden;
    const code = (err as { code?: string }).code ?? 'ERR_UNKNOWN';
    const message = `${code}: ${(err as Error).message}`;
    if (code === 'ERR_TOO_MANY_REDIRECTS' || code === 'ENOTFOUND' || code === 'ERR_INVALID_URL' || code === 'ERR_UNSUPPORTED_PROTOCOL') {
      throw new NonRetryableError(code, message, { url }, { cause: err });
    }
    // Timeouts, resets, refused connections and broken bodies: another attempt may succeed.
    throw new RetryableError(code, message, { url }, { cause: err });
  }
}
