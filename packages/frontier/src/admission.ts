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
 * Admits URLs to a crawl's frontier in one atomic step (admitUrls-3.lua) and returns the ones to
 * enqueue. Each URL is admitted once per crawl, whatever number of parsers find it at the same time.
 */
export interface Admission {
  /** the URLs to enqueue */
  admitted: Admitted[];
  /** how much the crawl's `skipped` counter changed */
  skipped: number;
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
    args.push(fp, id, VERDICT_CODE[c.verdict]);
  }
  const [codes, skipped] = await runScript<[number[], number]>(redis, 'admitUrls', [k.urls, k.counters, k.pending.fetch], args);
  const out: Admitted[] = [];
  list.forEach((c, i) => {
    const code = codes[i];
    if (code === 1 || code === 2) out.push({ url: c.url, depth: c.depth, ...(c.redirects ? { redirects: c.redirects } : {}), jobId: ids[i]!, isNew: code === 1 });
  });
  return { admitted: out, skipped };
}
