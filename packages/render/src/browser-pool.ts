import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { errorMessage, type Logger } from '@crawlfleet/core';
import type { Browser, BrowserContext, BrowserContextOptions, BrowserType, Page } from 'playwright-core';
import { SANDBOX_NEEDS, chromiumEnvironment, isSandboxFailure, sandboxPlan, type SandboxPlan, type SandboxSetting } from './chromium-launch.js';
import { ChromiumScratch, PROFILE_ENV, RM_WHILE_CHROMIUM_ENDS, scratchBase, sweepAbandoned, type BrowserDirs } from './chromium-scratch.js';

export interface BrowserPoolOptions {
  /** Chromium's executable (CHROMIUM_PATH; Debian's /usr/bin/chromium by default) */
  executablePath: string;
  /** pages a browser renders before it is retired (closed once its open pages end), against slow leaks */
  retireAfterPages: number;
  log: Logger;
  /** where the pool makes its own directory (os.tmpdir() by default) */
  tmpDir?: string;
  /** CHROMIUM_SANDBOX (auto by default) */
  sandbox?: SandboxSetting;
}

/**
 * Flags for a crawler's Chromium: no first-run, sync, component updates, background networking or
 * WebRTC outside the proxy, so that the only traffic is the pages' own, and all of it through the
 * guard; /dev/shm is small in containers.
 */
const CHROMIUM_ARGS = [
  '--disable-dev-shm-usage',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--no-first-run',
  '--no-default-browser-check',
  '--metrics-recording-only',
  '--mute-audio',
  '--force-webrtc-ip-handling-policy=disable_non_proxied_udp',
  '--webrtc-ip-handling-policy=disable_non_proxied_udp',
  // Loopback goes through the proxy too (Chromium bypasses it by default), so the guard sees it.
  '--proxy-bypass-list=<-loopback>',
];

/** How long a page's close may take before its browser is retired in its place. */
const PAGE_CLOSE_TIMEOUT_MS = 10_000;

/** Closes `page` (no beforeunload: a page cannot hold it); false when that did not end within `timeoutMs`. */
async function closesWithin(page: Page, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const closed = page.close({ runBeforeUnload: false }).then(
    () => true,
    () => true,
  );
  try {
    return await Promise.race([closed, new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** The pages of ours in a context, and those being opened. */
interface ContextPages {
  ours: WeakSet<Page>;
  creating: Set<Promise<Page>>;
}

/** Closes a page that opened in a context of ours unless it is one of ours (a popup). */
async function closeIfStray(page: Page, known: ContextPages): Promise<void> {
  await Promise.allSettled([...known.creating]);
  if (!known.ours.has(page)) await page.close({ runBeforeUnload: false }).catch(() => undefined);
}

/** Closes the pages of `context` that are not ours (popups), and waits for them to close. */
async function closeStrays(context: BrowserContext, known: ContextPages | undefined): Promise<void> {
  if (!known) return;
  await Promise.allSettled([...known.creating]);
  const strays = context.pages().filter((page) => !known.ours.has(page));
  await Promise.all(strays.map((page) => closesWithin(page, PAGE_CLOSE_TIMEOUT_MS)));
}

interface PooledBrowser {
  browser: Browser;
  /** the browser's contexts by key (a crawl): pages of one key share cookies and cache */
  contexts: Map<string, Promise<BrowserContext>>;
  /** pages begun in this browser */
  begun: number;
  open: number;
  retired: boolean;
}

/**
 * Chromium for the render stage: one browser at a time takes new pages, each in the browser's
 * context for its key (one per crawl: a crawl's pages share cookies, cache and a user agent, as a
 * browser's tabs do, and one crawl's never reach another's; a context per page would start a
 * renderer process per page, 2.5 times the CPU), and a browser is retired after
 * `retireAfterPages` pages: it takes no new page and closes once its last one ends, and a fresh
 * one takes over. A browser that crashes is dropped, and its pages fail (and are retried).
 * Chromium is started under `setpriv --pdeathsig KILL` where util-linux has it, so it dies with this
 * process even on kill -9, through a launcher script in the pool's own directory (ChromiumScratch).
 */
export class BrowserPool {
  private current: PooledBrowser | undefined;
  private launching: Promise<PooledBrowser> | undefined;
  private readonly all = new Set<PooledBrowser>();
  private readonly pages = new WeakMap<BrowserContext, ContextPages>();
  private closed = false;
  private launched = 0;
  /** this pool's own directory (the launcher, the browsers' profiles and temp files) */
  private readonly scratch: Promise<ChromiumScratch>;
  /** whether Chromium runs sandboxed (CHROMIUM_SANDBOX, the user, and what the platform allowed) */
  private sandbox: SandboxPlan;

  constructor(private readonly options: BrowserPoolOptions) {
    this.sandbox = sandboxPlan(options.sandbox ?? 'auto', process.getuid?.() ?? -1);
    this.scratch = this.openScratch(options.tmpDir ?? tmpdir());
    // A failure here fails each launch, which reports it.
    this.scratch.catch(() => undefined);
  }

  /** Runs `use` with a new page in the context of `key` (made with `contextOptions` on first use); the page is closed after it, whatever happens. */
  async withPage<T>(key: string, contextOptions: BrowserContextOptions, use: (page: Page) => Promise<T>): Promise<T> {
    const pooled = await this.take();
    pooled.open++;
    let page: Page | undefined;
    try {
      let context = pooled.contexts.get(key);
      if (!context) {
        context = pooled.browser.newContext(contextOptions);
        pooled.contexts.set(key, context);
        context.catch(() => pooled.contexts.delete(key));
      }
      page = await this.newPage(await context);
      return await use(page);
    } finally {
      // A page's close waits for a navigation under way, which a hostile page can keep going: past
      // the bound, the page is left to its browser, which is retired (and so closed, page and all).
      if (page && !(await closesWithin(page, PAGE_CLOSE_TIMEOUT_MS))) {
        this.options.log.warn({ timeoutMs: PAGE_CLOSE_TIMEOUT_MS }, 'a page did not close in time: its browser is retired');
        this.retire(pooled);
      }
      // A popup whose close is still under way (closeIfStray) ends before the job does.
      if (page) await closeStrays(page.context(), this.pages.get(page.context()));
      pooled.open--;
      if (pooled.retired && pooled.open === 0) await this.closeBrowser(pooled);
    }
  }

  /**
   * A page of ours in `context`. Any other page that opens in the context (a popup, `noopener` or
   * not) is closed as soon as it does: Chromium runs with popup blocking off, and a popup would
   * outlive its job, with its renderer process, its scripts and its requests. A page of ours is
   * known once its newPage() settles, so a new page is judged only after those under way have.
   */
  private async newPage(context: BrowserContext): Promise<Page> {
    let pages = this.pages.get(context);
    if (!pages) {
      const known: ContextPages = { ours: new WeakSet(), creating: new Set() };
      context.on('page', (opened) => void closeIfStray(opened, known));
      this.pages.set(context, known);
      pages = known;
    }
    const known = pages;
    const creating = context.newPage().then((page) => {
      known.ours.add(page);
      return page;
    });
    known.creating.add(creating);
    try {
      return await creating;
    } finally {
      known.creating.delete(creating);
    }
  }

  /** Pages open in this pool's browsers, as Chromium reports them. */
  openPages(): number {
    return [...this.all].reduce((sum, pooled) => sum + pooled.browser.contexts().reduce((n, context) => n + context.pages().length, 0), 0);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.launching?.catch(() => undefined);
    await Promise.all([...this.all].map((b) => this.closeBrowser(b)));
    await (await this.scratch.catch(() => undefined))?.remove();
  }

  private async take(): Promise<PooledBrowser> {
    if (this.closed) throw new Error('the browser pool is closed');
    const current = this.current;
    if (current && !current.retired && current.browser.isConnected() && current.begun < this.options.retireAfterPages) {
      current.begun++;
      return current;
    }
    if (current) this.retire(current);
    this.launching ??= this.launch().finally(() => (this.launching = undefined));
    const fresh = await this.launching;
    if (fresh.retired || fresh.begun >= this.options.retireAfterPages) return this.take();
    fresh.begun++;
    return fresh;
  }

  private async launch(): Promise<PooledBrowser> {
    // Loaded with the first page rendered: playwright-core takes about a second to load, which every
    // fetcher (this package's pure parts) and every `crawl` would pay otherwise.
    const { chromium } = await import('playwright-core');
    const scratch = await this.scratch;
    const browser = await this.startChromium(chromium, scratch).catch((error: unknown) => this.withoutSandboxIfRefused(error, () => this.startChromium(chromium, scratch)));
    if (this.launched === 0) this.reportSandbox();
    const pooled: PooledBrowser = { browser, contexts: new Map(), begun: 0, open: 0, retired: false };
    this.launched++;
    this.all.add(pooled);
    browser.on('disconnected', () => {
      this.all.delete(pooled);
      if (this.current === pooled) this.current = undefined;
      if (!pooled.retired && !this.closed) this.options.log.warn({ pages: pooled.begun }, 'Chromium exited on its own; its open pages fail and are retried, and a new one starts');
    });
    this.current = pooled;
    this.options.log.debug({ launched: this.launched }, 'Chromium started');
    return pooled;
  }

  /**
   * Starts one Chromium: through the launcher, with the sandbox as planned, only the allow-listed
   * environment (none of the fleet's secrets), and its profile, artifacts and temp files in this
   * pool's directory (removed when it closes).
   */
  private async startChromium(chromium: BrowserType, scratch: ChromiumScratch): Promise<Browser> {
    const dirs = await scratch.nextBrowser();
    try {
      const browser = await chromium.launch({
        executablePath: scratch.launcher,
        args: CHROMIUM_ARGS,
        headless: true,
        chromiumSandbox: this.sandbox.sandbox,
        artifactsDir: dirs.artifacts,
        env: chromiumEnvironment(process.env, { TMPDIR: scratch.tmp, [PROFILE_ENV]: dirs.profile }),
      });
      browser.on('disconnected', () => void removeBrowserDirs(dirs));
      return browser;
    } catch (error) {
      await removeBrowserDirs(dirs);
      throw error;
    }
  }

  /** After a failed launch: with CHROMIUM_SANDBOX=auto and a platform that refused the sandbox, `retry` without it from now on; otherwise the error stands. */
  private async withoutSandboxIfRefused(error: unknown, retry: () => Promise<Browser>): Promise<Browser> {
    if (!this.sandbox.sandbox || !isSandboxFailure(errorMessage(error))) throw error;
    if (this.sandbox.required) throw new Error(`CHROMIUM_SANDBOX=on, but Chromium could not start its sandbox; it needs ${SANDBOX_NEEDS}`, { cause: error });
    this.sandbox = { sandbox: false, required: false, reason: `the platform refused Chromium's sandbox; it needs ${SANDBOX_NEEDS}` };
    return retry();
  }

  private reportSandbox(): void {
    if (this.sandbox.sandbox) this.options.log.info('Chromium runs in its sandbox');
    else this.options.log.warn({ reason: this.sandbox.reason }, 'Chromium runs without its sandbox');
  }

  /** Makes this pool's directory, then removes those of renderers that died without removing theirs. */
  private async openScratch(tmp: string): Promise<ChromiumScratch> {
    const base = scratchBase(tmp);
    if (base !== tmp) this.options.log.warn({ tmpDir: tmp, base }, "TMPDIR is too long for Chromium's socket paths: the renderer's Chromium directory goes under /tmp");
    const scratch = await ChromiumScratch.create(base, this.options.executablePath);
    const removed = await sweepAbandoned(base, scratch.dir).catch((error: unknown) => {
      this.options.log.warn({ err: error, base }, "could not remove dead renderers' Chromium directories");
      return [];
    });
    if (removed.length > 0) this.options.log.info({ removed }, 'removed the Chromium directories of renderers that are gone (kill -9, a crash)');
    return scratch;
  }

  private retire(pooled: PooledBrowser): void {
    if (pooled.retired) return;
    pooled.retired = true;
    if (this.current === pooled) this.current = undefined;
    if (pooled.open === 0) void this.closeBrowser(pooled);
  }

  private async closeBrowser(pooled: PooledBrowser): Promise<void> {
    pooled.retired = true;
    this.all.delete(pooled);
    await pooled.browser.close().catch(() => undefined);
  }
}

/** Removes one browser's profile and artifacts once it has closed (or failed to start). */
async function removeBrowserDirs(dirs: BrowserDirs): Promise<void> {
  await rm(dirs.root, RM_WHILE_CHROMIUM_ENDS).catch(() => undefined);
}
