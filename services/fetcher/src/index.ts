import { SettledUrls } from '@crawlfleet/crawl';
import { UserAgentRotation, makeLookup, parseHostResolve } from '@crawlfleet/fetch';
import { BrowserPool, PageRenderer } from '@crawlfleet/render';
import { RenderRouting } from './render-routing.js';
import type { FetchStage } from './fetch-context.js';
import { fetchJob } from './fetch-job.js';
import { FIRST_PROBE_AFTER_MS, PoliteFetcher, ProxyPool, RobotsCache, proxyProbe, type ProxyEntry } from '@crawlfleet/politeness';
import { CrawlBacklogs, createStageWorker, fetchDeadlineMs, registerSessionGauge, runningStage, watchBackpressure, type FleetContext, type RunningStage } from '@crawlfleet/runtime';

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

/** The fetch stage's worker (a renderer's, on the render queue, with a browser): each job runs fetchJob's steps. */
function startFetchStage(ctx: FleetContext, options: FetchStageOptions): RunningStage {
  const { renderer } = options;
  const stage = wireFetchStage(ctx, options);
  // PARSE_IN_FETCHER: pages are parsed here, and the writers' backlog is the one to watch.
  const nextStage = ctx.env.parseInFetcher ? 'write' : 'parse';
  const worker = createStageWorker(ctx, {
    stage: 'fetch',
    ...(renderer ? { queue: 'render' as const } : {}),
    concurrency: options.concurrency,
    holdBack: nextStage === 'write' ? new CrawlBacklogs(ctx.redis, ctx.keys, 'write', ctx.env.writeHighWater) : new CrawlBacklogs(ctx.redis, ctx.keys, 'parse', ctx.env.parseHighWater),
    runsHooks: true,
    deadlineMs: (crawl) => fetchDeadlineMs(crawl.spider, renderer !== undefined),
    handler: (run) => fetchJob(stage, run),
  });
  const stopWatching =
    nextStage === 'write' ? watchBackpressure(worker, ctx.queues.write, ctx.env.writeHighWater, ctx.log) : watchBackpressure(worker, ctx.queues.parse, ctx.env.parseHighWater, ctx.log);
  return runningStage('fetch', worker, () => {
    stopWatching();
    stage.pool.stop();
  });
}

/**
 * What the stage's jobs share: the proxy pool (registered in Redis and probed), robots.txt's cache,
 * the polite fetcher, the user agents, the `auto` render routing and the links seen settled.
 */
function wireFetchStage(ctx: FleetContext, options: FetchStageOptions): FetchStage {
  const routing = new RenderRouting(ctx.redis, ctx.keys);
  const settledUrls = new SettledUrls();
  const userAgents = new UserAgentRotation(ctx.env.userAgents);
  const overrides = parseHostResolve(ctx.env.hostResolve);
  const pool = new ProxyPool(ctx.redis, ctx.keys, options.proxies ?? [], ctx.log);
  const robots = new RobotsCache(ctx.redis, ctx.keys, ctx.env.robotsCacheSeconds);
  // Resolution only: fetchPage vets the answers under each spider's own address policy.
  const resolve = makeLookup(overrides, true);
  const polite = new PoliteFetcher(ctx.redis, ctx.keys, pool, robots, ctx.log, resolve);
  registerSessionGauge(ctx.metrics.registry, () => polite.sessions.alive());
  const registered = pool.register();
  registered.catch(() => undefined);
  pool.startProbing({
    intervalMs: 1000,
    firstAfterMs: FIRST_PROBE_AFTER_MS,
    // PROXY_PROBE_URL under the SSRF guard, or a connection to the proxy: never a crawled page's URL.
    probe: proxyProbe({ probeUrl: ctx.env.proxyProbeUrl, resolve, userAgent: () => userAgents.pick() }),
  });
  return { ctx, renderer: options.renderer, routing, settledUrls, userAgents, pool, polite, registered };
}
