import type { Redis } from 'ioredis';
import { jobId, runScript, urlFingerprint, type Keys } from '@crawlfleet/core';
import type { ScopeVerdict } from './scope.js';

export interface Candidate {
  url: string;
  depth: number;
  verdict: ScopeVerdict;
  /** redirects that led here (a redirect's target is admitted as a URL of its own) */
  redirects?: number;
}

export interface Admitted {
  url: string;
  depth: number;
  redirects?: number;
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
 * Admits URLs to a crawl's frontier in one atomic step (admitUrls-4.lua) and returns the ones to
 * enqueue. Each URL is admitted once per crawl, whatever number of parsers find it at the same time.
 */
export interface Admission {
  /** the URLs to enqueue */
  admitted: Admitted[];
  /** how much the crawl's `skipped` counter changed */
  skipped: number;
}

/** Pure: what the frontier keeps of a URL in flight to rebuild its fetch job (u url, d depth, x redirects). */
export function encodeRequest(c: Pick<Candidate, 'url' | 'depth' | 'redirects'>): string {
  return JSON.stringify(c.redirects ? { u: c.url, d: c.depth, x: c.redirects } : { u: c.url, d: c.depth });
}

/** Pure: the inverse of encodeRequest; undefined for a value that is not one. */
export function decodeRequest(text: string | null | undefined): { url: string; depth: number; redirects?: number } | undefined {
  if (!text) return undefined;
  try {
    const r = JSON.parse(text) as { u?: unknown; d?: unknown; x?: unknown };
    if (typeof r.u !== 'string' || typeof r.d !== 'number') return undefined;
    return typeof r.x === 'number' ? { url: r.u, depth: r.d, redirects: r.x } : { url: r.u, depth: r.d };
  } catch {
    return undefined;
  }
}

export async function admitUrls(redis: Redis, keys: Keys, crawlId: string, candidates: Candidate[], maxPages: number | undefined): Promise<Admission> {
  const list = uniqueCandidates(candidates);
  if (list.length === 0) return { admitted: [], skipped: 0 };
  const k = keys.crawl(crawlId);
  const args: (string | number)[] = [maxPages ?? 0];
  const ids: string[] = [];
  for (const c of list) {
    const fp = urlFingerprint(crawlId, c.url);
    const id = jobId('fetch', fp);
    ids.push(id);
    args.push(fp, id, VERDICT_CODE[c.verdict], c.verdict === 'admit' ? encodeRequest(c) : '');
  }
  const [codes, skipped] = await runScript<[number[], number]>(redis, 'admitUrls', [k.urls, k.counters, k.pending.fetch, k.requests], args);
  const out: Admitted[] = [];
  list.forEach((c, i) => {
    const code = codes[i];
    if (code === 1 || code === 2) out.push({ url: c.url, depth: c.depth, ...(c.redirects ? { redirects: c.redirects } : {}), jobId: ids[i]!, isNew: code === 1 });
  });
  return { admitted: out, skipped };
}
