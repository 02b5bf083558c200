import { StaleRunError, jobId, runScript, urlFingerprint, type KnownPage, type PartKeys, type RedisClient } from '@crawlfleet/core';
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
  /** when the page last changed, as its sitemap's `<lastmod>` says (ISO 8601, UTC, to the second) */
  lastmod?: string;
  /** a recrawl: what the URL's last visit learnt (its fetch is conditional) */
  known?: KnownPage;
}

export interface Admitted {
  url: string;
  depth: number;
  redirects?: number;
  meta?: Record<string, unknown>;
  lastmod?: string;
  known?: KnownPage;
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
  /** a sitemap's `<lastmod>` for the URL (ISO 8601, UTC, to the second) */
  lastmod?: string;
  /** a recrawl: what the URL's last visit learnt */
  known?: KnownPage;
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

/** Pure: an ISO 8601 instant as whole seconds since 1970 (the frontier's compact lastmod); undefined for anything else. */
function epochSeconds(iso: string | undefined): number | undefined {
  const ms = iso === undefined ? Number.NaN : Date.parse(iso);
  return Number.isNaN(ms) ? undefined : Math.floor(ms / 1000);
}

/**
 * Pure: what the frontier keeps of a URL, in its host's queue and while it is in flight, to make or
 * rebuild its fetch job: `<depth> <url>`, then, only when there are any, a line of JSON with the rest
 * (x redirects, r referer, m a code spider's link metadata, l a sitemap's lastmod in epoch seconds,
 * k what a recrawled URL's last visit learnt).
 * The URL is canonical, so it holds no space or line break; the take reads it back in Lua to name the
 * job (urlOfRequest in takeReady.lua).
 */
export function encodeRequest(c: FetchRequest): string {
  const head = `${c.depth} ${c.url}`;
  const lastmod = epochSeconds(c.lastmod);
  const rest = {
    ...(c.redirects ? { x: c.redirects } : {}),
    ...(c.referer ? { r: c.referer } : {}),
    ...(c.meta ? { m: c.meta } : {}),
    ...(lastmod !== undefined ? { l: lastmod } : {}),
    ...(c.known ? { k: c.known } : {}),
  };
  return Object.keys(rest).length > 0 ? `${head}\n${JSON.stringify(rest)}` : head;
}

/**
 * Pure: a request as its host's queue keeps it: the URL's `http://<host>` is written `~`, and its
 * `https://<host>` `^` (the queue is the host's, so it is named once, in the queue's key); the take
 * writes it out again (expandRequest in takeReady.lua). A URL with a port keeps its full form.
 */
export function queuedRequest(request: string, host: string): string {
  const space = request.indexOf(' ');
  const url = request.slice(space + 1);
  for (const [scheme, mark] of [
    ['http://', '~'],
    ['https://', '^'],
  ] as const) {
    const origin = `${scheme}${host}/`;
    if (url.startsWith(origin)) return `${request.slice(0, space + 1)}${mark}${url.slice(origin.length - 1)}`;
  }
  return request;
}

/** Pure: the inverse of encodeRequest (and of its JSON form, `{u, d, ...}`); undefined for a value that is not one. */
export function decodeRequest(text: string | null | undefined): FetchRequest | undefined {
  if (!text) return undefined;
  try {
    let r: { u?: unknown; d?: unknown; x?: unknown; r?: unknown; m?: unknown; l?: unknown; k?: unknown };
    if (text.startsWith('{')) r = JSON.parse(text);
    else {
      const m = /^(\d+) (\S+)(?:\n(.*))?$/s.exec(text);
      if (!m) return undefined;
      r = { ...(m[3] ? JSON.parse(m[3]) : {}), d: Number(m[1]), u: m[2] };
    }
    if (typeof r.u !== 'string' || typeof r.d !== 'number') return undefined;
    const meta = typeof r.m === 'object' && r.m !== null && !Array.isArray(r.m) ? { meta: r.m as Record<string, unknown> } : {};
    const lastmod = typeof r.l === 'number' && Number.isFinite(r.l) ? { lastmod: new Date(r.l * 1000).toISOString() } : {};
    // what a recrawl carries is checked where the fetch job is (its schema): here it only travels
    const known = typeof r.k === 'object' && r.k !== null && !Array.isArray(r.k) ? { known: r.k as KnownPage } : {};
    return { url: r.u, depth: r.d, ...(typeof r.x === 'number' ? { redirects: r.x } : {}), ...(typeof r.r === 'string' ? { referer: r.r } : {}), ...meta, ...lastmod, ...known };
  } catch {
    return undefined;
  }
}

/** Pure: the flat {job id, request, wait ms, ...} list a script returns, as requests to enqueue. */
export function takenRequests(flat: readonly string[]): TakenRequest[] {
  const out: TakenRequest[] = [];
  for (let i = 0; i + 2 < flat.length; i += 3) {
    const request = decodeRequest(flat[i + 1]);
    if (request) out.push({ jobId: flat[i]!, request, delayMs: Number(flat[i + 2]) || 0 });
  }
  return out;
}

/** A host as a canonical URL spells it: a lowercase name or address, or an IPv6 address in brackets. */
const PLAIN_HOST = /^(?:[a-z0-9.-]+|\[[0-9a-f:.]+\])$/;

/**
 * Pure: a URL's host, as the frontier keys its queues and partitions (the URL's hostname). A
 * canonical URL (the frontier's) is read without a parse: `scheme://host[:port]/...`; anything else
 * goes through the WHATWG parser, which gives the same answer for a canonical URL.
 */
export function hostOfUrl(url: string): string {
  const from = url.indexOf('://') + 3;
  if (from > 2) {
    let end = from;
    while (end < url.length && !'/?#'.includes(url[end]!)) end++;
    const authority = url.slice(from, end);
    // A user-info part, or a port after an IPv6 address, is left to the parser.
    const host = authority.startsWith('[') ? authority.slice(0, authority.indexOf(']') + 1) : authority.split(':', 1)[0]!;
    if (!authority.includes('@') && PLAIN_HOST.test(host)) return host;
  }
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
export async function admitToPartition(redis: RedisClient, k: PartKeys, crawlId: string, candidates: readonly Candidate[], policy: AdmissionPolicy, take: FrontierTake, run = ''): Promise<Admission> {
  if (candidates.length === 0) return { admitted: [], taken: [], skipped: 0 };
  const byHost = new Map<string, Candidate[]>();
  for (const c of candidates) {
    const host = hostOfUrl(c.url);
    const list = byHost.get(host);
    if (list) list.push(c);
    else byHost.set(host, [c]);
  }
  const args: (string | number)[] = [policy.maxPages ?? 0, policy.maxPagesPerHost ?? 0, take.window, take.minBatch, take.horizonMs, k.urlBucket, k.hostQueue, crawlId, run];
  const order: { c: Candidate; id: string }[] = [];
  for (const [host, list] of byHost) {
    const limits = policy.hostLimits(host);
    args.push(host, limits.concurrency, Math.round(limits.delayMs), list.length);
    for (const c of list) {
      const fp = urlFingerprint(crawlId, c.url);
      order.push({ c, id: jobId('fetch', fp) });
      args.push(fp, c.verdict === 'admit' ? `a${queuedRequest(encodeRequest(c), host)}` : VERDICT_CODE[c.verdict]);
    }
  }
  const [codes, skipped, taken, stale] = await runScript<[number[], number, string[], number?]>(
    redis,
    'admitUrls',
    [k.part, k.counters, k.pending.fetch, k.requests, k.hosts, k.ready, k.backlog],
    args,
  );
  if (stale === 1) throw new StaleRunError(crawlId, run);
  const out: Admitted[] = [];
  order.forEach(({ c, id }, i) => {
    const code = codes[i];
    if (code === 1 || code === 2)
      out.push({
        url: c.url,
        depth: c.depth,
        ...(c.redirects ? { redirects: c.redirects } : {}),
        ...(c.meta ? { meta: c.meta } : {}),
        ...(c.lastmod ? { lastmod: c.lastmod } : {}),
        ...(c.known ? { known: c.known } : {}),
        jobId: id,
        isNew: code === 1,
      });
  });
  return { admitted: out, taken: takenRequests(taken), skipped };
}
