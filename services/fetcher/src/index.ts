import { NonRetryableError, RetryableError, errorMessage, jobId, renderModeFor, renderSettings, type FetchJob, type PageRecord } from '@crawlfleet/core';
import { SettledUrls, admitAndEnqueue, bodyHash, conditionalHeaders, crawlTake, pageRecordAfter, partKeysOfUrl } from '@crawlfleet/crawl';
import { UserAgentRotation, captureOf, decodePage, encodeBody, headerValue, flatHeaders, isHtml, isParseable, makeLookup, parseHostResolve, runRequestHook } from '@crawlfleet/fetch';
import { extractResponse } from '@crawlfleet/extract';
import { allowedHosts, canonicalizeUrl, scopeVerdict } from '@crawlfleet/frontier';
import { parsePage } from '@crawlfleet/parser';
import { BrowserPool, PageRenderer, needsRendering } from '@crawlfleet/render';
import { RenderRouting } from './render-routing.js';
import { FIRST_PROBE_AFTER_MS, PoliteFetcher, ProxyPool, RobotsCache, proxyProbe, type ProxyEntry } from '@crawlfleet/politeness';
import { DeferError, GiveUpError, CrawlBacklogs, createStageWorker, fetchDeadlineMs, runningStage, watchBackpressure, writeHandOver, type FleetContext, type RunningStage } from '@crawlfleet/runtime';

export interface FetcherOptions {
  concurrency: number;
  /** the proxy pool (PROXY_LIST or --proxies); empty: direct requests */
  proxies?: ProxyEntry[];
}

/**
 * A fetcher of the render queue: its pages load in a browser (Chromium through the SSRF guard)
 * instead of one plain request; everything else is the fetch stage's (robots.txt, the host's slot,
 * retries, redirects, the parse hand-over).
 */
interface FetchStageOptions extends FetcherOptions {
  renderer?: PageRenderer;
}

export interface RendererOptions {
  concurrency: number;
  /** Chromium (CHROMIUM_PATH) */
  executablePath: string;
  /** pages a browser renders before it is retired */
  retireAfterPages: number;
  /** CHROMIUM_SANDBOX */
  sandbox?: 'auto' | 'on' | 'off';
}

/**
 * The render stage: fetch-stage jobs of the render queue, each page loaded and rendered in
 * Chromium, its DOM after scripts handed to the parse stage like a fetched page. Browsers go direct
 * (through the guard), not through the fleet's proxy pool.
 */
export function startRenderer(ctx: FleetContext, options: RendererOptions): RunningStage {
  const pool = new BrowserPool({ executablePath: options.executablePath, retireAfterPages: options.retireAfterPages, sandbox: options.sandbox, log: ctx.log });
  const renderer = new PageRenderer(pool, parseHostResolve(ctx.env.hostResolve), ctx.log, (stats) => ctx.metrics.renderedPage(stats));
  const stage = startFetchStage(ctx, { concurrency: options.concurrency, renderer });
  return {
    ...stage,
    async close() {
      await stage.close();
      // The browsers first: the guard's tunnels (WebSockets, CONNECT) end with their connections.
      await pool.close();
      await renderer.close();
    },
  };
}

/**
 * The fetch stage: download a page politely (robots.txt, fleet-wide host and proxy limits, proxy
 * health), classify the response, and hand an HTML or JSON body to the parse stage compressed. A
 * job that must wait for its host or proxy is parked (DeferError), so it holds no slot while it waits.
 */
export function startFetcher(ctx: FleetContext, options: FetcherOptions): RunningStage {
  return startFetchStage(ctx, options);
}

function startFetchStage(ctx: FleetContext, options: FetchStageOptions): RunningStage {
  const { renderer } = options;
  const routing = new RenderRouting(ctx.redis, ctx.keys);
  // PARSE_IN_FETCHER: pages are parsed here, and the writers' backlog is the one to watch.
  const nextStage = ctx.env.parseInFetcher ? 'write' : 'parse';
  const settledUrls = new SettledUrls();
  const userAgents = new UserAgentRotation(ctx.env.userAgents);
  const overrides = parseHostResolve(ctx.env.hostResolve);
  const pool = new ProxyPool(ctx.redis, ctx.keys, options.proxies ?? [], ctx.log);
  const robots = new RobotsCache(ctx.redis, ctx.keys, ctx.env.robotsCacheSeconds);
  // Resolution only: fetchPage vets the answers under each spider's own address policy.
  const resolve = makeLookup(overrides, true);
  const polite = new PoliteFetcher(ctx.redis, ctx.keys, pool, robots, ctx.log, resolve);
  const registered = pool.register();
  registered.catch(() => undefined);
  pool.startProbing({
    intervalMs: 1000,
    firstAfterMs: FIRST_PROBE_AFTER_MS,
    // PROXY_PROBE_URL under the SSRF guard, or a connection to the proxy: never a crawled page's URL.
    probe: proxyProbe({ probeUrl: ctx.env.proxyProbeUrl, resolve, userAgent: () => userAgents.pick() }),
  });

  const worker = createStageWorker(ctx, {
    stage: 'fetch',
    ...(renderer ? { queue: 'render' as const } : {}),
    concurrency: options.concurrency,
    holdBack: nextStage === 'write' ? new CrawlBacklogs(ctx.redis, ctx.keys, 'write', ctx.env.writeHighWater) : new CrawlBacklogs(ctx.redis, ctx.keys, 'parse', ctx.env.parseHighWater),
    runsHooks: true,
    deadlineMs: (crawl) => fetchDeadlineMs(crawl.spider, renderer !== undefined),
    handler: async ({ job, data, crawl, fingerprint, isLastAttempt, deferrals, incarnation, spiderModule, signal }) => {
      await registered;
      const { spider } = crawl;
      const renderMode = renderModeFor(renderSettings(spider), data.url);
      // A page that needs a browser goes to the render queue: always, or once pages of its kind are known to need one.
      if (!renderer && (renderMode === 'always' || (renderMode === 'auto' && (await routing.route(data.crawlId, data.url)) === 'render'))) return { reroute: 'render' };
      // A code spider's request hook may run more than once for one URL (waits, retries): it should only compute.
      const hooked = await runRequestHook(spiderModule, data.url, { crawlId: data.crawlId, spider, depth: data.depth, meta: data.meta ?? {} });
      // A recrawl asks for the page only if it changed since the last visit.
      const conditional = conditionalHeaders(data.known);
      const request =
        Object.keys(conditional).length > 0
          ? { method: hooked?.method ?? ('GET' as const), ...(hooked?.body !== undefined ? { body: hooked.body } : {}), headers: { ...hooked?.headers, ...conditional } }
          : hooked;
      const outcome = await polite.fetch({
        url: data.url,
        spider,
        leaseId: job.id!,
        deferrals,
        avoidProxies: data.avoidProxies,
        redirects: data.redirects,
        userAgent: userAgents.pick(spider.userAgents),
        crawlId: data.crawlId,
        ...(request ? { request } : {}),
        ...(crawl.sink.warc && !renderer ? { keepWire: true } : {}),
        ...(renderer ? { load: renderer.loaderFor(spider, incarnation), signal } : {}),
      });
      switch (outcome.kind) {
        case 'wait':
          throw new DeferError(outcome.waitMs, outcome.reason);
        case 'disallowed':
          return { counters: { skipped: 1 }, url: { fingerprint, state: 'R' } };
        case 'robots-unavailable':
          throw new RetryableError('ERR_ROBOTS_UNAVAILABLE', outcome.reason, { url: data.url });
        case 'error': {
          ctx.metrics.fetchError((outcome.error as { code?: string }).code ?? 'ERR_UNKNOWN');
          // A proxy that failed is not the URL's fault: go again through another, without spending an
          // attempt, until every proxy has been tried once.
          const avoid = data.avoidProxies ?? [];
          if (outcome.proxyFault && outcome.proxy && avoid.length < pool.size) {
            await job.updateData({ ...data, avoidProxies: [...avoid, outcome.proxy.id] } satisfies FetchJob);
            throw new DeferError(50, `proxy ${outcome.proxy.label} failed: ${errorMessage(outcome.error)}`);
          }
          throw outcome.error;
        }
      }
      const { page, verdict, proxy } = outcome;
      const visitedAt = new Date();
      const fetchedAt = visitedAt.toISOString();
      ctx.metrics.response(page.status, page.elapsedMs / 1000, page.body.length);
      // What goes to the writers besides items: the exchange (WARC output), the URL's record (recrawl).
      const capture = captureOf(page, fetchedAt);
      const toWriters = (record?: PageRecord) =>
        capture || record
          ? { handOver: writeHandOver(ctx, fingerprint, { crawlId: data.crawlId, url: data.url, items: [], ...(capture ? { capture } : {}), ...(record ? { page: record } : {}) }) }
          : {};
      // A page that is not parsed goes straight to the writers to be archived.
      const archive = toWriters();
      const { recrawl } = spider;
      const visit = (status: number, hash?: string) =>
        pageRecordAfter(
          { url: data.url, depth: data.depth, status, etag: headerValue(page.headers, 'etag'), lastModified: headerValue(page.headers, 'last-modified'), hash, at: visitedAt, lastmod: data.lastmod },
          data.known,
          recrawl!,
        );
      // A rendered page's requests to its own host (scripts, XHR) count against the host as requests
      // of its own would: its next turn comes that many delays later.
      const host = page.hostRequests ? { ...outcome.host, startedAt: outcome.host.startedAt + page.hostRequests * outcome.host.delayMs } : outcome.host;
      const fetched = { counters: { fetched: 1, ...(renderer ? { rendered: 1 } : {}) }, url: { fingerprint, state: 'd' }, host };
      // A recrawl's 304: the page is as it was; its record is refreshed, and it is not parsed again.
      if (recrawl && data.known && page.status === 304) return { ...fetched, counters: { fetched: 1, notModified: 1 }, ...toWriters(visit(304).record) };
      if (verdict.kind === 'blocked') {
        await ctx.redis.hincrby(partKeysOfUrl(ctx.keys, crawl, data.url).counters, 'blocked', 1);
        ctx.metrics.count({ blocked: 1 });
        if (isLastAttempt) throw new GiveUpError('ERR_BLOCKED', verdict.reason, { ...fetched, ...archive }, { url: data.url, status: page.status, proxy: proxy?.label });
        if (proxy) await job.updateData({ ...data, avoidProxies: [...new Set([...(data.avoidProxies ?? []), proxy.id])] } satisfies FetchJob);
        throw new RetryableError('ERR_BLOCKED', verdict.reason, { url: data.url, proxy: proxy?.label }, { retryAfterMs: outcome.retryAfterMs });
      }
      if (verdict.kind === 'redirect') {
        // A redirect that leaves the origin: its target is a URL of the crawl like any link (dedup,
        // scope, robots.txt, its host's slot), at the same depth.
        const redirects = (data.redirects ?? 0) + page.redirects + 1;
        const target = canonicalizeUrl(verdict.location);
        const done = { url: { fingerprint, state: 'd' }, host, ...archive };
        if (redirects > spider.limits.maxRedirects)
          throw new GiveUpError('ERR_TOO_MANY_REDIRECTS', `more than ${spider.limits.maxRedirects} redirects (limits.maxRedirects), the last to ${verdict.location}`, done, { url: data.url });
        if (!target) throw new GiveUpError('ERR_HTTP_STATUS', `HTTP ${page.status} to ${verdict.location}, which is not an http(s) URL`, done, { url: data.url });
        const verdictForTarget = scopeVerdict(target, data.depth, spider, allowedHosts(spider));
        ctx.metrics.count(
          await admitAndEnqueue(ctx.redis, ctx.keys, ctx.queues, crawl, [{ url: target, depth: data.depth, verdict: verdictForTarget, redirects, ...(data.meta ? { meta: data.meta } : {}) }], {
            referer: data.url,
            take: crawlTake(ctx.env.frontierWindow, crawl, spider),
          }),
        );
        ctx.log.debug({ url: data.url, status: page.status, location: target, scope: verdictForTarget }, 'redirect to another origin: its target is a new URL of the crawl');
        return { ...done, counters: { redirected: 1 } };
      }
      if (verdict.kind === 'retry' && !isLastAttempt) {
        throw new RetryableError('ERR_HTTP_STATUS', verdict.reason, { url: data.url }, { retryAfterMs: outcome.retryAfterMs });
      }
      if (verdict.kind !== 'ok') throw new GiveUpError('ERR_HTTP_STATUS', verdict.reason, { ...fetched, ...archive }, { url: data.url, status: page.status });
      const visited = recrawl ? visit(page.status, bodyHash(page.body)) : undefined;
      // The same body as at the last visit: its items are those stored already.
      if (visited?.outcome === 'unchanged') return { ...fetched, counters: { fetched: 1, unchanged: 1 }, ...toWriters(visited.record) };
      if (isParseable(page.contentType, page.body)) {
        let renderSkipped = 0;
        if (!renderer && renderMode === 'auto' && isHtml(page.contentType, page.body)) {
          // `auto` judges the plain page: a browser only when the rules found nothing and scripts could have built it.
          const text = decodePage(page.body, page.contentType);
          const found = extractResponse({ body: text, contentType: page.contentType, url: page.url }, spider, { crawlId: data.crawlId, fetchedAt });
          const needed = needsRendering(spider, page.url, text, found);
          await routing.record(data.crawlId, data.url, needed);
          if (needed) return { reroute: 'render' };
          renderSkipped = 1;
        }
        const fields = {
          crawlId: data.crawlId,
          url: data.url,
          finalUrl: page.url,
          depth: data.depth,
          status: page.status,
          contentType: page.contentType ?? '',
          fetchedAt,
          ...(capture ? { capture } : {}),
          ...(visited ? { page: visited.record } : {}),
          // only a code spider's parse hook reads them; never Set-Cookie and other credentials (Bull Board shows jobs)
          ...(spiderModule ? { headers: flatHeaders(page.headers) } : {}),
          ...(data.meta ? { meta: data.meta } : {}),
        };
        const counters = { ...fetched.counters, ...(renderSkipped ? { renderSkipped } : {}) };
        if (ctx.env.parseInFetcher) {
          // Parsed here: the page's items go straight to the writers, and its URL is marked parsed.
          const parsed = await parsePage(ctx, { page: { ...fields, body: page.body }, crawl, fingerprint, incarnation, spiderModule, settledUrls }).catch((err: unknown) => {
            // A page that cannot be parsed was still fetched: its fetch counts, as in the parse stage.
            if (err instanceof NonRetryableError) throw new GiveUpError(err.code, err.message, { ...fetched, ...archive }, err.context);
            throw err;
          });
          return { ...fetched, url: { fingerprint, state: 'p' }, counters: { ...counters, ...parsed.counters }, ...(parsed.handOver ? { handOver: parsed.handOver } : {}) };
        }
        // The parse job: made pending by this job's finish, then added (the harness).
        return {
          ...fetched,
          counters,
          handOver: { stage: 'parse', id: jobId('parse', fingerprint), data: { ...fields, body: encodeBody(page.body) }, opts: { attempts: 3, backoff: { type: 'crawlfleet' } } },
        };
      }
      return { ...fetched, ...toWriters(visited?.record) };
    },
  });
  const stopWatching =
    nextStage === 'write' ? watchBackpressure(worker, ctx.queues.write, ctx.env.writeHighWater, ctx.log) : watchBackpressure(worker, ctx.queues.parse, ctx.env.parseHighWater, ctx.log);
  return runningStage('fetch', worker, () => {
    stopWatching();
    pool.stop();
  });
}
