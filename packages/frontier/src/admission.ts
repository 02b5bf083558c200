import { jobId, runScript, urlFingerprint, type Keys, type RedisClient } from '@crawlfleet/core';
import type { ScopeVerdict } from './scope.js';

export interface Candidate {
  url: string;
  depth: number;
  verdict: ScopeVerdict;
  /** redirects that led here (a redirect's target is admitted as a URL of its own) */
  redirects?: number;
  /** the page the URL was found on */
  referer?: string;
  /** what a code spider's link carries to the hooks of the page it leads to */
  meta?: Record<string, unknown>;
}

export interface Admitted {
  url: string;
  depth: number;
  redirects?: number;
  meta?: Record<string, unknown>;
  jobId: string;
  /** true when first admitted now; false when admitted before and still unfinished */
  isNew: boolean;
}

/** Pure: each URL once, at the smallest depth it was found at, in first-seen order. */
export function uniqueCandidates(candidates: readonly Candidate[]): Candidate[] {
  const unique = new Map<string, Candidate>();
  for (const c of candidates) {
    const prior = unique.get(c.url);
    if (!prior || c.depth < prior.depth) unique.set(c.url, c);
  }
  return [...unique.values()];
}

const VERDICT_CODE: Record<ScopeVerdict, string> = { admit: 'a', 'out-of-scope': 's', 'too-deep': 'd' };

/**
 * What admitting URLs changed: the URLs admitted, the ones to enqueue again, and the requests the
 * call took from the frontier's head into the fetch stage (admitUrls-6.lua).
 */
export interface Admission {
  /** the URLs admitted now (isNew, into the frontier) or earlier and still pending (to enqueue again) */
  admitted: Admitted[];
  /** requests taken from the frontier into the fetch stage: enqueue them */
  taken: TakenRequest[];
  /** how much the crawl's `skipped` counter changed */
  skipped: number;
}

/** A fetch request taken from the frontier: its job id is pending; its job is still to be added. */
export interface TakenRequest {
  jobId: string;
  request: FetchRequest;
}

export interface FetchRequest {
  url: string;
  depth: number;
  redirects?: number;
  referer?: string;
  meta?: Record<string, unknown>;
}

/**
 * How URLs move from the frontier into the fetch stage: at most `window` fetch jobs of a crawl
 * pending at once, taken `minBatch` or more at a time so a take pays for its round trip.
 */
export interface FrontierTake {
  window: number;
  minBatch: number;
}

/** Pure: the take for a window: batches of a 32nd of it. */
export function frontierTake(window: number): FrontierTake {
  return { window, minBatch: Math.max(1, Math.ceil(window / 32)) };
}

/**
 * Pure: what the frontier keeps of a URL in flight, to make or rebuild its fetch job (u url, d
 * depth, x redirects, r referer, m a code spider's link metadata).
 */
export function encodeRequest(c: FetchRequest): string {
  return JSON.stringify({ u: c.url, d: c.depth, ...(c.redirects ? { x: c.redirects } : {}), ...(c.referer ? { r: c.referer } : {}), ...(c.meta ? { m: c.meta } : {}) });
}

/** Pure: the inverse of encodeRequest; undefined for a value that is not one. */
export function decodeRequest(text: string | null | undefined): FetchRequest | undefined {
  if (!text) return undefined;
  try {
    const r = JSON.parse(text) as { u?: unknown; d?: unknown; x?: unknown; r?: unknown; m?: unknown };
    if (typeof r.u !== 'string' || typeof r.d !== 'number') return undefined;
    const meta = typeof r.m === 'object' && r.m !== null && !Array.isArray(r.m) ? { meta: r.m as Record<string, unknown> } : {};
    return { url: r.u, depth: r.d, ...(typeof r.x === 'number' ? { redirects: r.x } : {}), ...(typeof r.r === 'string' ? { referer: r.r } : {}), ...meta };
  } catch {
    return undefined;
  }
}

/** Pure: the flat {job id, request JSON, ...} list a script returns, as requests to enqueue. */
export function takenRequests(flat: readonly string[]): TakenRequest[] {
  const out: TakenRequest[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const request = decodeRequest(flat[i + 1]);
    if (request) out.push({ jobId: flat[i]!, request });
  }
  return out;
}

/**
 * Admits URLs to a crawl's frontier in one atomic step (admitUrls-6.lua). Each URL is admitted once
 * per crawl, whatever number of parsers find it at the same time; the same step takes URLs from
 * the frontier's head into the fetch stage while the crawl's window has room.
 */
export async function admitUrls(redis: RedisClient, keys: Keys, crawlId: string, candidates: Candidate[], maxPages: number | undefined, take: FrontierTake): Promise<Admission> {
  const list = uniqueCandidates(candidates);
  if (list.length === 0) return { admitted: [], taken: [], skipped: 0 };
  const k = keys.crawl(crawlId);
  const args: (string | number)[] = [maxPages ?? 0, take.window, take.minBatch];
  const ids: string[] = [];
  for (const c of list) {
    const fp = urlFingerprint(crawlId, c.url);
    const id = jobId('fetch', fp);
    ids.push(id);
    args.push(fp, c.verdict === 'admit' ? `a${encodeRequest(c)}` : VERDICT_CODE[c.verdict]);
  }
  const [codes, skipped, taken] = await runScript<[number[], number, string[]]>(redis, 'admitUrls', [k.urls, k.counters, k.pending.fetch, k.requests, k.frontier, k.meta], args);
  const out: Admitted[] = [];
  list.forEach((c, i) => {
    const code = codes[i];
    if (code === 1 || code === 2) out.push({ url: c.url, depth: c.depth, ...(c.redirects ? { redirects: c.redirects } : {}), ...(c.meta ? { meta: c.meta } : {}), jobId: ids[i]!, isNew: code === 1 });
  });
  return { admitted: out, taken: takenRequests(taken), skipped };
}
