import { conditionalHeaders } from '@crawlfleet/crawl';
import { runRequestHook, type HttpRequestShape } from '@crawlfleet/fetch';
import type { PoliteFetchOutcome, SessionView } from '@crawlfleet/politeness';
import type { FetchJobInput, FetchStage } from './fetch-context.js';

/**
 * Pure: the request with a recrawl's conditional headers (If-None-Match, If-Modified-Since) over the
 * request hook's (a GET when the hook asked for nothing); the hook's request as it is without them.
 */
export function withConditions(hooked: HttpRequestShape | undefined, conditional: Record<string, string>): HttpRequestShape | undefined {
  return Object.keys(conditional).length > 0
    ? { method: hooked?.method ?? ('GET' as const), ...(hooked?.body !== undefined ? { body: hooked.body } : {}), headers: { ...hooked?.headers, ...conditional } }
    : hooked;
}

/**
 * Build the request, once the host's turn and the session are known: what a code spider's request
 * hook asks for (told the session's cookies), and a recrawl's conditions.
 */
export async function buildRequest(run: FetchJobInput, session: SessionView | undefined): Promise<HttpRequestShape | undefined> {
  const { data } = run;
  // The session's cookies are read only for a hook that will be told them.
  const told = session && hasRequestHook(run) ? { session: { id: session.id, userAgent: session.userAgent, cookies: await session.cookies() } } : {};
  // A code spider's request hook may run more than once for one URL (retries): it should only compute.
  const hooked = await runRequestHook(run.spiderModule, data.url, { crawlId: data.crawlId, spider: run.crawl.spider, depth: data.depth, meta: data.meta ?? {}, ...told });
  // A recrawl asks for the page only if it changed since the last visit.
  return withConditions(hooked, conditionalHeaders(data.known));
}

/**
 * The polite fetch (PoliteFetcher): robots.txt, the host's turn, a proxy, then the request, or in a
 * renderer the browser's load; the exchange is kept as on the wire for a crawl that writes WARC.
 */
export async function politeFetch(stage: FetchStage, run: FetchJobInput): Promise<PoliteFetchOutcome> {
  const { renderer } = stage;
  const { data, crawl } = run;
  const { spider } = crawl;
  return await stage.polite.fetch({
    url: data.url,
    spider,
    leaseId: run.job.id!,
    deferrals: run.deferrals,
    avoidProxies: data.avoidProxies,
    redirects: data.redirects,
    userAgent: stage.userAgents.pick(spider.userAgents),
    crawlId: data.crawlId,
    requestFor: (session) => buildRequest(run, session),
    // The hook runs inside the host's turn, for at most its deadline (withinHookDeadline).
    ...(hasRequestHook(run) ? { hookMs: spider.limits.timeoutMs } : {}),
    ...(crawl.sink.warc && !renderer ? { keepWire: true } : {}),
    ...(renderer ? { load: renderer.loaderFor(spider, run.incarnation), signal: run.signal } : {}),
  });
}

function hasRequestHook(run: FetchJobInput): boolean {
  return typeof run.spiderModule?.code.request === 'function';
}
