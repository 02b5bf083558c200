import { admitAndEnqueue, crawlTake } from '@crawlfleet/crawl';
import { allowedHosts, canonicalizeUrl, scopeVerdict } from '@crawlfleet/frontier';
import { GiveUpError, type StageResult } from '@crawlfleet/runtime';
import type { Answer } from './answer.js';

/** What a redirect to another origin makes of its job (redirectStep). */
export type RedirectStep = { kind: 'follow'; target: string; redirects: number } | { kind: 'tooMany'; redirects: number } | { kind: 'notHttp' };

/**
 * Pure: a redirect that leaves the origin. Its target (canonical) becomes a URL of the crawl, with
 * every redirect that led to it counted (the job's, the ones followed inside the request, this one),
 * unless that passes limits.maxRedirects (`tooMany`) or the target is not an http(s) URL (`notHttp`).
 */
export function redirectStep(location: string, redirectsBefore: number | undefined, redirectsInRequest: number, maxRedirects: number): RedirectStep {
  const redirects = (redirectsBefore ?? 0) + redirectsInRequest + 1;
  const target = canonicalizeUrl(location);
  if (redirects > maxRedirects) return { kind: 'tooMany', redirects };
  if (!target) return { kind: 'notHttp' };
  return { kind: 'follow', target, redirects };
}

/**
 * A redirect that leaves the origin: its target is a URL of the crawl like any link (dedup,
 * scope, robots.txt, its host's slot), at the same depth.
 */
export async function followRedirect(answer: Answer, location: string): Promise<StageResult> {
  const { ctx } = answer.stage;
  const { data, crawl, fingerprint } = answer.run;
  const { spider } = crawl;
  const { page } = answer;
  const step = redirectStep(location, data.redirects, page.redirects, spider.limits.maxRedirects);
  const done = { url: { fingerprint, state: 'd' }, host: answer.fetched.host, ...answer.archive };
  if (step.kind === 'tooMany')
    throw new GiveUpError('ERR_TOO_MANY_REDIRECTS', `more than ${spider.limits.maxRedirects} redirects (limits.maxRedirects), the last to ${location}`, done, { url: data.url });
  if (step.kind === 'notHttp') throw new GiveUpError('ERR_HTTP_STATUS', `HTTP ${page.status} to ${location}, which is not an http(s) URL`, done, { url: data.url });
  const verdictForTarget = scopeVerdict(step.target, data.depth, spider, allowedHosts(spider));
  ctx.metrics.count(
    await admitAndEnqueue(
      ctx.redis,
      ctx.keys,
      ctx.queues,
      crawl,
      [{ url: step.target, depth: data.depth, verdict: verdictForTarget, redirects: step.redirects, ...(data.meta ? { meta: data.meta } : {}) }],
      {
        referer: data.url,
        take: crawlTake(ctx.env.frontierWindow, crawl, spider),
      },
    ),
  );
  ctx.log.debug({ url: data.url, status: page.status, location: step.target, scope: verdictForTarget }, 'redirect to another origin: its target is a new URL of the crawl');
  return { ...done, counters: { redirected: 1 } };
}
