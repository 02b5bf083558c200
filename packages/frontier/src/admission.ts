import { jobId, runScript, urlFingerprint, type PartKeys, type RedisClient } from '@crawlfleet/core';
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
 * call took from the partition's ready hosts into the fetch stage (admitUrls-7.lua).
 */
export interface Admission {
  /** the URLs admitted now (isNew, into their host's queue) or earlier and still pending (to enqueue again) */
  admitted: Admitted[];
  /** requests taken into the fetch stage: enqueue them */
  taken: TakenRequest[];
  /** how much the crawl's `skipped` counter changed */
  skipped: number;
}

/** A fetch request taken into the fetch stage: its job id is pending; its job is still to be added. */
export interface TakenRequest {
  jobId: string;
  request: FetchRequest;
  /** how long before its host's turn: the job waits that long in BullMQ's delayed set */
  delayMs: number;
}

export interface FetchRequest {
  url: string;
  depth: number;
  redirects?: number;
  referer?: string;
  meta?: Record<string, unknown>;
}

/** How far ahead a host's turn may be for its URL to be handed to the fetch stage now. */
export const FRONTIER_HORIZON_MS = 60_000;

/**
 * How URLs move from a partition's host queues into the fetch stage: at most `window` fetch jobs of
 * the partition pending at once, taken `minBatch` or more at a time so a take pays for its round
 * trip, from hosts whose turn comes within `horizonMs`.
 */
export interface FrontierTake {
  window: number;
  minBatch: number;
  horizonMs: number;
}

/**
 * Pure: the take of each of a crawl's partitions. The crawl's window (FRONTIER_WINDOW) is shared by
 * its partitions, but a partition's is never below `minWindow` (the largest concurrency the spider
 * gives a host, so one host can always fill its concurrency); batches are a 32nd of it.
 */
export function frontierTake(window: number, parts = 1, minWindow = 1): FrontierTake {
  const perPart = Math.max(Math.ceil(window / Math.max(1, parts)), minWindow);
  return { window: perPart, minBatch: Math.max(1, Math.ceil(perPart / 32)), horizonMs: FRONTIER_HORIZON_MS };
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

/** Pure: the flat {job id, request JSON, wait ms, ...} list a script returns, as requests to enqueue. */
export function takenRequests(flat: readonly string[]): TakenRequest[] {
  const out: TakenRequest[] = [];
  for (let i = 0; i + 2 < flat.length; i += 3) {
    const request = decodeRequest(flat[i + 1]);
    if (request) out.push({ jobId: flat[i]!, request, delayMs: Number(flat[i + 2]) || 0 });
  }
  return out;
}

/** Pure: a URL's host, as the frontier keys its queues and partitions (the URL's hostname). */
export function hostOfUrl(url: string): string {
  try {
    return new URL(url).hostname;
  } catch {
    return '';
  }
}

/** What admission needs of the spider: its budgets, and each host's concurrency and delay. */
export interface AdmissionPolicy {
  maxPages?: number | undefined;
  maxPagesPerHost?: number | undefined;
  hostLimits(host: string): { concurrency: number; delayMs: number };
}

/**
 * Admits URLs of one partition of a crawl in one atomic step (admitUrls-7.lua): each URL once per
 * crawl, whatever number of parsers find it at the same time, into its host's queue; the same step
 * feeds the fetch stage from the partition's ready hosts. Every candidate must belong to this
 * partition (its host's), and appear once (uniqueCandidates).
 */
export async function admitToPartition(redis: RedisClient, k: PartKeys, crawlId: string, candidates: readonly Candidate[], policy: AdmissionPolicy, take: FrontierTake): Promise<Admission> {
  if (candidates.length === 0) return { admitted: [], taken: [], skipped: 0 };
  const byHost = new Map<string, Candidate[]>();
  for (const c of candidates) {
    const host = hostOfUrl(c.url);
    const list = byHost.get(host);
    if (list) list.push(c);
    else byHost.set(host, [c]);
  }
  const args: (string | number)[] = [policy.maxPages ?? 0, policy.maxPagesPerHost ?? 0, take.window, take.minBatch, take.horizonMs, k.urlBucket, k.hostQueue];
  const order: { c: Candidate; id: string }[] = [];
  for (const [host, list] of byHost) {
    const limits = policy.hostLimits(host);
    args.push(host, limits.concurrency, Math.round(limits.delayMs), list.length);
    for (const c of list) {
      const fp = urlFingerprint(crawlId, c.url);
      order.push({ c, id: jobId('fetch', fp) });
      args.push(fp, c.verdict === 'admit' ? `a${encodeRequest(c)}` : VERDICT_CODE[c.verdict]);
    }
  }
  const [codes, skipped, taken] = await runScript<[number[], number, string[]]>(redis, 'admitUrls', [k.part, k.counters, k.pending.fetch, k.requests, k.hosts, k.ready, k.backlog], args);
  const out: Admitted[] = [];
  order.forEach(({ c, id }, i) => {
    const code = codes[i];
    if (code === 1 || code === 2) out.push({ url: c.url, depth: c.depth, ...(c.redirects ? { redirects: c.redirects } : {}), ...(c.meta ? { meta: c.meta } : {}), jobId: id, isNew: code === 1 });
  });
  return { admitted: out, taken: takenRequests(taken), skipped };
}
