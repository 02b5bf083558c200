import { NonRetryableError, RetryableError, renderSettings, type Logger, type RenderSettings, type Spider } from '@crawlfleet/core';
import { addressPolicy, type AddressPolicy, type FetchResult, type ForbiddenAddressError } from '@crawlfleet/fetch';
import type { BrowserContext, Page, Request, Response, Route, WebSocketRoute } from 'playwright-core';
import type { BrowserPool } from './browser-pool.js';
import { gateRedirects, redirectAnswer, verdictOfChain } from './browser-redirects.js';
import { GuardProxy } from './guard-proxy.js';
import { contentSelectors } from './script-built.js';

/**
 * What one rendered page cost: the requests its scripts made (those to its own host among them), those
 * blocked by type, those past the budget, and the characters of its DOM copied into this process.
 */
export interface RenderedPageStats {
  requests: number;
  hostRequests: number;
  blocked: number;
  overBudget: number;
  domChars: number;
  /** navigations of the page after its own (a meta refresh, a script's): refused */
  navigationsRefused: number;
}

/** Loads a page in a browser the way a fetch answers it (status, headers, final URL, body); `signal` stops it. */
export type RenderLoader = (url: string, options: RenderLoadOptions) => Promise<FetchResult>;

export interface RenderLoadOptions {
  userAgent: string;
  signal?: AbortSignal;
  /** the redirects a plain request would follow inline (default: same origin only) */
  followRedirect?: (from: URL, to: URL) => boolean;
  /** redirects left of limits.maxRedirects (default: the spider's) */
  maxRedirects?: number;
}

/**
 * Renders pages for the render stage: each in a fresh browser context whose traffic all goes
 * through a GuardProxy for the spider's address policy (one proxy per policy, made on first use),
 * with the spider's blocked resource types and request budget, and the page's DOM taken once its
 * wait condition is met.
 */
export class PageRenderer {
  private readonly proxies = new Map<string, Promise<GuardProxy>>();
  /** each page's own rules, for the context-wide route: a request of any other page is refused */
  private readonly routers = new WeakMap<Page, (route: Route) => Promise<void>>();
  /** contexts whose route is in place (once each) */
  private readonly routed = new WeakMap<BrowserContext, Promise<void>>();

  constructor(
    private readonly pool: BrowserPool,
    /** HOST_RESOLVE: names the guard resolves itself */
    private readonly overrides: ReadonlyMap<string, string>,
    private readonly log: Logger,
    private readonly onPage: (stats: RenderedPageStats) => void = () => undefined,
  ) {}

  /** Loads a crawl's pages: `contextKey` names the crawl (its pages share a browser context). */
  loaderFor(spider: Spider, contextKey: string): RenderLoader {
    const settings = renderSettings(spider);
    const policy = addressPolicy(spider);
    return async (url, { userAgent, signal, followRedirect = sameOrigin, maxRedirects = spider.limits.maxRedirects }) => {
      // The guard's requests get the longer of the spider's timeouts: the navigation is one of them.
      const proxy = await this.proxyFor(policy, Math.max(spider.limits.timeoutMs, settings.timeoutMs));
      // The page's own URL under the guard before a browser opens it: a refusal is the URL's fault,
      // final; a name that does not resolve now is the navigation's to report (retried).
      const target = new URL(url);
      const verdict = await proxy.vet(target.hostname, Number(target.port || (target.protocol === 'https:' ? 443 : 80)));
      if ('forbidden' in verdict && verdict.forbidden) throw verdict.forbidden;
      const started = performance.now();
      // A crawl's pages share a context, whose user agent is the one picked for its first page: a
      // browser keeps one identity, and rotating it per page would cost a new context (and renderer
      // processes) per page. A retired browser's successor picks again.
      const contextOptions = { userAgent, proxy: { server: proxy.url, bypass: '<-loopback>' }, serviceWorkers: 'block' as const, acceptDownloads: false };
      return this.pool.withPage(`${contextKey} ${proxy.url}`, contextOptions, async (page) => {
        const stats: RenderedPageStats = { requests: 0, hostRequests: 0, blocked: 0, overBudget: 0, domChars: 0, navigationsRefused: 0 };
        const host = new URL(url).host;
        await this.routeContext(page.context());
        const departure = departureOf();
        this.routers.set(page, pageRouter(settings, host, stats, departure.record));
        await page.routeWebSocket(/.*/, socketRouter(settings, host, stats));
        // Past the job's deadline the page is closed: whatever the render awaits then fails.
        const stop = () => void page.close({ runBeforeUnload: false }).catch(() => undefined);
        signal?.addEventListener('abort', stop, { once: true });
        const navigations = mainFrameNavigations(page, departure.record);
        const gate = await gateRedirects(page, url, followRedirect, maxRedirects);
        // Where the chain left a plain request's rules: held at that hop (the gate), or, without
        // one, judged after the load.
        const stopOf = async () => gate?.verdict() ?? (await verdictOfChain(navigations.last(), followRedirect, maxRedirects));
        try {
          const rendered = await this.render(page, url, settings, contentSelectors(spider, url), spider.limits.maxResponseBytes, started, stats, departure).catch(async (err: unknown) => {
            // A load that failed on a hop a plain request would not have followed (held by the gate,
            // another origin's refusal, a guard's 403) is that hop's redirect, as a plain request met it.
            const stop = await stopOf();
            if (stop) return redirectAnswer(stop, maxRedirects, started);
            throw (await this.forbiddenOf(proxy, navigations.last()?.url())) ?? err;
          });
          const stop = rendered.redirects > 0 ? await stopOf() : undefined;
          if (stop) return redirectAnswer(stop, maxRedirects, started);
          // The guard answers a refused plain-HTTP request 403: that is no site's block.
          const forbidden = rendered.status === 403 ? await this.forbiddenOf(proxy, rendered.url) : undefined;
          if (forbidden) throw forbidden;
          return { ...rendered, hostRequests: stats.hostRequests };
        } finally {
          gate?.close();
          signal?.removeEventListener('abort', stop);
          this.onPage(stats);
          if (stats.overBudget > 0) this.log.debug({ url, ...stats, maxRequestsPerPage: settings.maxRequestsPerPage }, 'page made more requests than render.maxRequestsPerPage: the rest were refused');
        }
      });
    };
  }

  /**
   * Routes every request of a context, not only its pages': a popup's first request, which a
   * page's route never sees, and everything a popup (closed by the pool as soon as it opens) asks
   * for before that. A request goes by the rules of the page it comes from; one of any other page,
   * or one whose frame is not known yet (a popup's navigation), is refused. A WebSocket of a page
   * of ours goes by its page's route (socketRouter), any other is closed.
   */
  private routeContext(context: BrowserContext): Promise<void> {
    let routed = this.routed.get(context);
    if (!routed) {
      routed = Promise.all([
        context.route('**/*', (route) => {
          const owner = pageOf(route);
          const router = owner && this.routers.get(owner);
          return router ? router(route) : route.abort('blockedbyclient');
        }),
        context.routeWebSocket(/.*/, (socket) => socket.close()),
      ]).then(() => undefined);
      this.routed.set(context, routed);
    }
    return routed;
  }

  /**
   * A failed or refused navigation whose URL the guard refuses is the URL's fault, final
   * (ERR_FORBIDDEN_ADDRESS, as a plain fetch says it), not a site's block or a network error.
   */
  private async forbiddenOf(proxy: GuardProxy, url: string | undefined): Promise<ForbiddenAddressError | undefined> {
    if (!url?.startsWith('http')) return undefined;
    const target = new URL(url);
    const verdict = await proxy.vet(target.hostname, Number(target.port || (target.protocol === 'https:' ? 443 : 80)));
    return 'forbidden' in verdict ? verdict.forbidden : undefined;
  }

  async close(): Promise<void> {
    const proxies = await Promise.allSettled(this.proxies.values());
    await Promise.all(proxies.map((p) => (p.status === 'fulfilled' ? p.value.close() : undefined)));
    this.proxies.clear();
  }

  private async render(
    page: Page,
    url: string,
    settings: RenderSettings,
    content: string[][],
    maxBytes: number,
    started: number,
    stats: RenderedPageStats,
    departure: Departure,
  ): Promise<FetchResult> {
    const deadline = Date.now() + settings.timeoutMs;
    let response: Response | null;
    try {
      // Committed, not loaded: a page that sends the browser elsewhere before its load (a script's
      // `location.replace`) has its navigation refused, and a load that waited for it would never end.
      response = await page.goto(url, { waitUntil: 'commit', timeout: settings.timeoutMs });
    } catch (err) {
      throw navigationError(err, url, settings.timeoutMs);
    }
    if (!response) throw new RetryableError('ERR_RENDER', `the browser got no response for ${url}`, { url });
    const loaded = page.waitForLoadState('load', { timeout: Math.max(1, deadline - Date.now()) });
    loaded.catch(() => undefined); // a page that departs first leaves this wait to time out unread
    try {
      await Promise.race([loaded, departure.away]);
    } catch (err) {
      throw navigationError(err, url, settings.timeoutMs);
    }
    const contentType = (await response.headerValue('content-type')) ?? undefined;
    // A document the browser builds (HTML, XHTML) is taken as its DOM after scripts; anything else as sent.
    const isDocument = contentType === undefined || /html|xml/i.test(contentType);
    if (isDocument && departure.target() === undefined) await Promise.race([waitForContent(page, settings.waitFor, content), departure.away]);
    // The page sent the browser to another URL before its content was taken: that is its redirect.
    const target = departure.target();
    if (target !== undefined) return clientRedirect(response, target, started);
    // A script may keep the page busy for ever: taking its DOM (or its body) has the load's timeout too.
    const body = await withinRenderTimeout(isDocument ? takeDom(page, url, maxBytes, stats) : response.body(), settings.timeoutMs, url);
    if (body.length > maxBytes) throw tooLarge(url, maxBytes);
    let redirects = 0;
    for (let r = response.request().redirectedFrom(); r; r = r.redirectedFrom()) redirects++;
    return {
      url: page.url(),
      status: response.status(),
      headers: await response.allHeaders(),
      // The DOM is serialized as a string: whatever the page's charset was, its bytes here are UTF-8.
      contentType: isDocument ? 'text/html; charset=utf-8' : contentType,
      body,
      elapsedMs: performance.now() - started,
      redirects,
    };
  }

  /** The guard proxy for a policy and a timeout (its upstream requests' deadline and its tunnels' idle limit). */
  private proxyFor(policy: AddressPolicy, timeoutMs: number): Promise<GuardProxy> {
    const key = JSON.stringify({ policy, timeoutMs });
    let proxy = this.proxies.get(key);
    if (!proxy) {
      proxy = GuardProxy.start(policy, this.overrides, (target, reason) => this.log.info({ target, reason }, 'a page requested an address the SSRF guard refuses'), {
        timeoutMs,
        onRefusalSummary: (summary) => this.log.info(summary, 'the SSRF guard refused more requests than it logs one by one'),
      });
      this.proxies.set(key, proxy);
    }
    return proxy;
  }
}

/**
 * What a page may request: its own navigation (and its redirects: that is the fetch itself), and of
 * its scripts' requests the types not blocked, up to the budget. Any later navigation of the page (a
 * meta refresh, a script's `location =`) is refused, as a plain fetch follows none: the page is what
 * its URL answered, and a page that reloads itself for ever cannot keep the browser busy (nor
 * hold its close, which waits for a navigation under way).
 */
function pageRouter(settings: RenderSettings, host: string, stats: RenderedPageStats, onDeparture: (request: Request) => void): (route: Route) => Promise<void> {
  let navigated = false;
  return (route) => {
    const request = route.request();
    if (request.isNavigationRequest() && request.frame().parentFrame() === null) {
      if (!navigated) {
        navigated = true;
        return route.continue();
      }
      stats.navigationsRefused++;
      onDeparture(request);
      // A 204 ends a navigation with the page left as it is (an aborted one shows an error page).
      return route.fulfill({ status: 204 });
    }
    if (settings.block.includes(request.resourceType())) {
      stats.blocked++;
      return route.abort('blockedbyclient');
    }
    if (stats.requests >= settings.maxRequestsPerPage) {
      stats.overBudget++;
      return route.abort('blockedbyclient');
    }
    stats.requests++;
    if (new URL(request.url()).host === host) stats.hostRequests++;
    return route.continue();
  };
}

const sameOrigin = (from: URL, to: URL) => from.origin === to.origin;

/**
 * Where a page sent the browser after its own navigation (a script's `location`, a meta refresh to
 * another URL): the first such URL other than the page's own (a refresh of itself is no departure),
 * and a promise that settles when it is known. Its navigation is refused (pageRouter); the page's
 * answer is then a redirect to it (clientRedirect), which the fetcher follows as a plain redirect:
 * a new URL of the crawl under its scope, robots.txt, its host's turn and limits.maxRedirects.
 */
interface Departure {
  record: (request: Request) => void;
  target: () => string | undefined;
  away: Promise<void>;
}

function departureOf(): Departure {
  let target: string | undefined;
  let arrive: () => void = () => undefined;
  const away = new Promise<void>((resolve) => {
    arrive = resolve;
  });
  return {
    record: (request) => {
      if (target !== undefined) return;
      const to = withoutFragment(request.url());
      const from = withoutFragment(request.frame().url());
      if (to === from || !to.startsWith('http')) return;
      target = to;
      arrive();
    },
    target: () => target,
    away,
  };
}

const withoutFragment = (url: string) => url.replace(/#.*$/, '');

/** Pure: a client-side redirect as the answer a plain request would see (a 302 to its target). */
export function clientRedirectResult(url: string, target: string, redirects: number, elapsedMs: number): FetchResult {
  return { url, status: 302, headers: { location: target }, contentType: undefined, body: Buffer.alloc(0), elapsedMs, redirects };
}

function clientRedirect(response: Response, target: string, started: number): FetchResult {
  let redirects = 0;
  for (let r = response.request().redirectedFrom(); r; r = r.redirectedFrom()) redirects++;
  return clientRedirectResult(response.url(), target, redirects, performance.now() - started);
}

/** The page's main-frame navigation requests as they come: the last one ends the chain of redirects the browser followed. */
/**
 * The page's own navigation and the redirects it met (`last`). A later navigation of the main frame
 * is a departure, told to `onDeparture` as pageRouter tells its refusals: pageRouter does not see
 * every one (a script's `location.replace` during the first document's parse was seen reaching the
 * site in about one load in three under load), and one that went through must still answer as the
 * page's redirect, not as the page.
 */
function mainFrameNavigations(page: Page, onDeparture: (request: Request) => void): { last(): Request | undefined } {
  let last: Request | undefined;
  page.on('request', (request) => {
    if (!request.isNavigationRequest()) return;
    if (last === undefined) {
      if (request.frame() === page.mainFrame()) last = request;
      return;
    }
    if (request.redirectedFrom() === last) last = request;
    else if (request.frame() === page.mainFrame() && request.redirectedFrom() === null) onDeparture(request);
  });
  return { last: () => last };
}

/** The page a request comes from; undefined when its frame is not known (a popup's first navigation, a service worker). */
function pageOf(route: Route): Page | undefined {
  try {
    return route.request().frame().page();
  } catch {
    return undefined;
  }
}

/**
 * A page's WebSockets count against its request budget as its other requests do: past it, a socket
 * is closed before it connects; within it, it connects through the browser's proxy (the guard).
 */
function socketRouter(settings: RenderSettings, host: string, stats: RenderedPageStats): (socket: WebSocketRoute) => void {
  return (socket) => {
    if (stats.requests >= settings.maxRequestsPerPage) {
      stats.overBudget++;
      void socket.close({ code: 1008, reason: 'over the page request budget' });
      return;
    }
    stats.requests++;
    if (new URL(socket.url()).host === host) stats.hostRequests++;
    socket.connectToServer();
  };
}

/**
 * The page's wait after its load event, all of it within maxWaitMs; the DOM is taken as it is then:
 * - `waitFor.selector`: until it is in the DOM;
 * - else until the spider's rules would find their content (contentSelectors): a page's scripts
 *   may wait, fetch and build for a while, and network idle alone fires too early on a busy machine;
 * - and `waitFor.networkIdle`, or no rule to wait for: until no request has been in flight for 500 ms.
 */
async function waitForContent(page: Page, waitFor: RenderSettings['waitFor'], content: string[][]): Promise<void> {
  if (waitFor.maxWaitMs === 0) return;
  const deadline = Date.now() + waitFor.maxWaitMs;
  const left = () => Math.max(1, deadline - Date.now());
  if (waitFor.selector !== undefined) await page.waitForSelector(waitFor.selector, { state: 'attached', timeout: left() }).catch(() => undefined);
  else if (content.length > 0) {
    await page
      .waitForFunction((groups) => groups.some((group) => group.every((selector) => (globalThis as unknown as BrowserWindow).document.querySelector(selector) !== null)), content, {
        timeout: left(),
        polling: 50,
      })
      .catch(() => undefined);
  }
  if (waitFor.networkIdle || (waitFor.selector === undefined && content.length === 0)) await page.waitForLoadState('networkidle', { timeout: left() }).catch(() => undefined);
}

/**
 * The page's DOM after scripts, as UTF-8, refused inside the page when it is over the cap: a page can
 * build a DOM of many millions of characters, and copying it here first would cost this process the
 * memory and the time of the whole. A UTF-8 encoding is never shorter than the string's UTF-16
 * length, so a DOM longer than `maxBytes` characters is over the cap; one just under it in
 * characters and over it in bytes is refused after the copy (at most 3 times the cap).
 */
async function takeDom(page: Page, url: string, maxBytes: number, stats: RenderedPageStats): Promise<Buffer> {
  const chars = await page.evaluate(() => {
    const { document } = globalThis as unknown as BrowserWindow;
    return document.documentElement ? document.documentElement.outerHTML.length : 0;
  });
  if (chars > maxBytes) throw tooLarge(url, maxBytes);
  const html = await page.content();
  stats.domChars = html.length;
  return Buffer.from(html, 'utf8');
}

/** `step`, or ERR_TIMEOUT once `timeoutMs` has passed (the page's close, which follows, ends the step). */
async function withinRenderTimeout<T>(step: Promise<T>, timeoutMs: number, url: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RetryableError('ERR_TIMEOUT', `the page did not give its content within ${timeoutMs} ms (render.timeoutMs): a script keeps it busy`, { url })), timeoutMs);
  });
  step.catch(() => undefined);
  try {
    return await Promise.race([step, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function tooLarge(url: string, maxBytes: number): NonRetryableError {
  return new NonRetryableError('ERR_RESPONSE_TOO_LARGE', `rendered page larger than ${maxBytes} bytes (limits.maxResponseBytes)`, { url });
}

/** The little of a browser's window that a page function here reads (this package is built without the DOM's types). */
interface BrowserWindow {
  document: { querySelector(selector: string): unknown; documentElement: { outerHTML: string } | null };
}

/** A failed navigation as the fleet's errors: a timeout or a network error is retried. */
function navigationError(err: unknown, url: string, timeoutMs: number): Error {
  const message = (err as Error).message ?? String(err);
  if ((err as Error).name === 'TimeoutError') return new RetryableError('ERR_TIMEOUT', `the page did not load within ${timeoutMs} ms (render.timeoutMs)`, { url });
  // An attachment: a browser downloads it rather than render it, and it will every time.
  if (/Download is starting/.test(message)) return new NonRetryableError('ERR_RENDER_DOWNLOAD', `${url} is a download (an attachment), which a browser does not render`, { url });
  const net = /net::(ERR_[A-Z_]+)/.exec(message);
  return new RetryableError(net ? `ERR_RENDER_${net[1]!.slice(4)}` : 'ERR_RENDER', message.split('\n')[0]!, { url }, { cause: err });
}
