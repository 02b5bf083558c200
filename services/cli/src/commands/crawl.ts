import { defaultSinkSpec, loadSpiderDefinition, mayRender, mongoSinkSpec, sinkSpecFor, withWarcOutput, type Keys, type RedisClient, type SinkSpec } from '@crawlfleet/core';
import { listDeadLetters } from '@crawlfleet/crawl';
import { startFetcher, startRenderer } from '@crawlfleet/fetcher';
import { startParser } from '@crawlfleet/parser';
import { loadProxyList } from '@crawlfleet/politeness';
import { createFleetContext, onShutdownSignal, refuseBesideLegacyCrawls, startReconciler, type RunningStage } from '@crawlfleet/runtime';
import { seedCrawl } from '@crawlfleet/seeder';
import { startWriter } from '@crawlfleet/writer';
import { EXIT, ExitError } from '../exit-codes.js';
import { envWith } from '../options.js';
import { progressTicker } from '../progress.js';
import { waitForEnd } from '../wait-for-end.js';
import { fullStatus } from '../full-status.js';
import { summarizeReasons } from './dead-letters.js';
import { concurrencyPerThread, parseConcurrency, startParserThreads } from '../parser-threads.js';

export interface CrawlOptions {
  crawlId?: string;
  out?: string;
  mongo?: string;
  warc?: string;
  warcRollover?: number;
  redis?: string;
  concurrency: number;
  maxPages?: number;
  proxies?: string;
  /** parser worker threads; 0 parses in the main thread */
  parserThreads: number;
  /** pages rendered at once, when the spider renders (--render-concurrency) */
  renderConcurrency?: number;
  json?: boolean;
  quiet?: boolean;
}

/** Chromium pages open at once in `crawl`'s renderer: each takes about a core's share while it runs scripts. */
const DEFAULT_RENDER_CONCURRENCY = 4;

/**
 * Every stage in this one process: the same workers on the same queues as a fleet, so a crawl
 * started here can be finished by separate workers, and the other way round.
 */
export async function crawlCommand(spiderFile: string, options: CrawlOptions): Promise<number> {
  const { spider: loaded, module } = await loadSpiderDefinition(spiderFile);
  const spider = options.maxPages ? { ...loaded, maxPages: options.maxPages } : loaded;
  const env = envWith({ ...options, ...(options.mongo ? { mongo: options.mongo } : {}) });
  // --out FILE, else --mongo URL or MONGO_URL, else ./data/<crawl-id>/items.jsonl.
  const sinkFor = (crawlId: string): SinkSpec => withWarcOutput(itemSinkFor(crawlId), options);
  const itemSinkFor = (crawlId: string): SinkSpec => {
    if (options.out) return sinkSpecFor(options.out);
    // Stored without the password; this process's writer has it as its MONGO_URL (envWith above).
    if (options.mongo) return mongoSinkSpec(options.mongo);
    if (process.env.MONGO_URL) return { kind: 'mongo' };
    return defaultSinkSpec(crawlId);
  };
  sinkFor('check');
  const proxies = loadProxyList({ ...(options.proxies ? { file: options.proxies } : {}), env: env.proxyList });
  const ctx = await createFleetContext({ env, name: 'crawl' });
  await refuseBesideLegacyCrawls(ctx);
  if (module) ctx.spiderModules.remember(module);
  const stages: Pick<RunningStage, 'close'>[] = [];
  const stopReconciler = startReconciler(ctx);
  const stopAll = async () => {
    stopReconciler();
    // Every stage gets to finish its in-flight jobs even when one of them (a crashed thread) cannot.
    const closed = await Promise.allSettled(stages.map((s) => s.close()));
    await ctx.close();
    const failure = closed.find((c): c is PromiseRejectedResult => c.status === 'rejected');
    if (failure) throw failure.reason;
  };
  onShutdownSignal(ctx.log, stopAll, { exitCode: () => EXIT.interrupted, drainMs: env.shutdownDrainMs });
  try {
    const { crawlId } = await seedCrawl(ctx, { spider, ...(module ? { module: module.ref } : {}), ...(options.crawlId ? { crawlId: options.crawlId } : {}), sink: sinkFor });
    const parsing = parseConcurrency(options.concurrency);
    // The parser is CPU-bound: in threads of its own (--parser-threads N) it takes a second core.
    // With PARSE_IN_FETCHER=1 the parsing happens in the fetcher, so the threads run the fetcher, and
    // the main thread keeps a parser only for parse jobs handed over before (a replay, an older fleet).
    const fetchInThreads = env.parseInFetcher && options.parserThreads > 0;
    let threadFailure: Error | undefined;
    if (options.parserThreads > 0) {
      const perThread = fetchInThreads
        ? { stage: 'fetch' as const, concurrency: concurrencyPerThread(options.concurrency, options.parserThreads), proxies }
        : { stage: 'parse' as const, concurrency: concurrencyPerThread(parsing, options.parserThreads) };
      const threads = await startParserThreads(options.parserThreads, { redis: options.redis, mongo: options.mongo, ...perThread }, ctx.log);
      threads.failed.catch((err: Error) => (threadFailure = err));
      // Closing a thread that already failed fails again: the crawl reports that failure once (onTick).
      stages.push({
        close: () =>
          threads.close().catch((err: unknown) => {
            if (!threadFailure) throw err;
          }),
      });
    }
    if (options.parserThreads === 0 || fetchInThreads) stages.push(startParser(ctx, { concurrency: fetchInThreads ? 2 : parsing }));
    if (!fetchInThreads) stages.push(startFetcher(ctx, { concurrency: options.concurrency, proxies }));
    stages.push(startWriter(ctx, { concurrency: Math.max(4, options.concurrency) }));
    // A spider that renders gets a renderer here too; its browser starts with the first page it renders.
    if (mayRender(spider))
      stages.push(
        startRenderer(ctx, {
          concurrency: options.renderConcurrency ?? DEFAULT_RENDER_CONCURRENCY,
          executablePath: env.chromiumPath,
          retireAfterPages: env.renderRetireAfterPages,
          sandbox: env.chromiumSandbox,
        }),
      );
    const progress = progressTicker(ctx.redis, ctx.keys, crawlId, !options.quiet && process.stderr.isTTY === true);
    const state = await waitForEnd(ctx.redis, ctx.keys, crawlId, {
      onTick: async () => {
        // A parser thread that died ends the crawl: nothing is lost (its jobs run again), and a
        // restart loop would hide the bug or the page that keeps killing it.
        if (threadFailure) throw new ExitError(EXIT.failure, `${threadFailure.message}; the crawl stopped: run it again with --crawl-id ${crawlId} to resume`);
        await progress.tick();
      },
    });
    progress.end();
    stopReconciler();
    await Promise.all(stages.map((s) => s.close()));
    const status = await fullStatus(ctx, crawlId);
    if (options.json) process.stdout.write(`${JSON.stringify(status)}\n`);
    else if (!options.quiet && status) {
      const c = status.counters;
      const failed = c.failed > 0 ? `${c.failed} failed (${await failureReasons(ctx, crawlId, c.failed)})` : '0 failed';
      process.stderr.write(`crawl ${crawlId} ${state}: ${c.fetched} pages fetched, ${c.items} items, ${c.written} written, ${failed}, ${c.skipped} skipped\n`);
      if (c.failed > 0) process.stderr.write(`the failures: crawlfleet dead-letters --crawl-id ${crawlId}\n`);
    }
    if (state !== 'done') throw new ExitError(EXIT.failure, `crawl ${crawlId} ended ${state}`);
    return EXIT.ok;
  } finally {
    await stopAll();
  }
}

/** Up to this many dead letters are read for the closing line's reasons; past it, only their count. */
const REASONS_READ_LIMIT = 50_000;

async function failureReasons(ctx: { redis: RedisClient; keys: Keys }, crawlId: string, failed: number): Promise<string> {
  if (failed > REASONS_READ_LIMIT) return 'too many to summarize here';
  return summarizeReasons(await listDeadLetters(ctx.redis, ctx.keys, crawlId));
}
