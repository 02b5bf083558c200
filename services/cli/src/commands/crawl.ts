import { defaultSinkSpec, loadSpiderDefinition, mayRender, mongoSinkSpec, sinkSpecFor, withWarcOutput, type Env, type Keys, type RedisClient, type SinkSpec, type Spider } from '@crawlfleet/core';
import { listDeadLetters, type CrawlState } from '@crawlfleet/crawl';
import { startFetcher, startRenderer } from '@crawlfleet/fetcher';
import { startParser } from '@crawlfleet/parser';
import { loadProxyList, type ProxyEntry } from '@crawlfleet/politeness';
import { createFleetContext, onShutdownSignal, refuseBesideLegacyCrawls, startReconciler, type FleetContext, type RunningStage } from '@crawlfleet/runtime';
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

/** What the steps of one `crawl` run share. */
interface CrawlRun {
  ctx: FleetContext;
  env: Env;
  options: CrawlOptions;
  proxies: ProxyEntry[];
  /** every stage started in this process, closed at the end */
  stages: Pick<RunningStage, 'close'>[];
  stopReconciler: () => void;
  /** the failure of a parser thread, which ends the crawl (see waitWithProgress) */
  threadFailure?: Error;
}

/**
 * Every stage in this one process: the same workers on the same queues as a fleet, so a crawl
 * started here can be finished by separate workers, and the other way round.
 */
export async function crawlCommand(spiderFile: string, options: CrawlOptions): Promise<number> {
  const { spider: loaded, module } = await loadSpiderDefinition(spiderFile);
  const spider = options.maxPages ? { ...loaded, maxPages: options.maxPages } : loaded;
  const env = envWith({ ...options, ...(options.mongo ? { mongo: options.mongo } : {}) });
  const sinkFor = (crawlId: string): SinkSpec => withWarcOutput(itemSinkFor(crawlId, options), options);
  sinkFor('check');
  const proxies = loadProxyList({ ...(options.proxies ? { file: options.proxies } : {}), env: env.proxyList });
  const ctx = await createFleetContext({ env, name: 'crawl' });
  await refuseBesideLegacyCrawls(ctx);
  if (module) ctx.spiderModules.remember(module);
  const run: CrawlRun = { ctx, env, options, proxies, stages: [], stopReconciler: startReconciler(ctx) };
  const stopAll = () => stopRun(run);
  onShutdownSignal(ctx.log, stopAll, { exitCode: () => EXIT.interrupted, drainMs: env.shutdownDrainMs });
  try {
    const { crawlId } = await seedCrawl(ctx, { spider, ...(module ? { module: module.ref } : {}), ...(options.crawlId ? { crawlId: options.crawlId } : {}), sink: sinkFor });
    await startStages(run, spider);
    const state = await waitWithProgress(run, crawlId);
    run.stopReconciler();
    await Promise.all(run.stages.map((s) => s.close()));
    await printSummary(run, crawlId, state);
    if (state !== 'done') throw new ExitError(EXIT.failure, `crawl ${crawlId} ended ${state}`);
    return EXIT.ok;
  } finally {
    await stopAll();
  }
}

/** --out FILE, else --mongo URL or MONGO_URL, else ./data/<crawl-id>/items.jsonl. */
function itemSinkFor(crawlId: string, options: CrawlOptions): SinkSpec {
  if (options.out) return sinkSpecFor(options.out);
  // Stored without the password; this process's writer has it as its MONGO_URL (envWith in crawlCommand).
  if (options.mongo) return mongoSinkSpec(options.mongo);
  if (process.env.MONGO_URL) return { kind: 'mongo' };
  return defaultSinkSpec(crawlId);
}

/** Stops the reconciler and closes every stage, then the fleet context; the first stage's failure is thrown after. */
async function stopRun(run: CrawlRun): Promise<void> {
  run.stopReconciler();
  // Every stage gets to finish its in-flight jobs even when one of them (a crashed thread) cannot.
  const closed = await Promise.allSettled(run.stages.map((s) => s.close()));
  await run.ctx.close();
  const failure = closed.find((c): c is PromiseRejectedResult => c.status === 'rejected');
  if (failure) throw failure.reason;
}

/** Starts the stages: the threads first (--parser-threads N), then those of the main thread. */
async function startStages(run: CrawlRun, spider: Spider): Promise<void> {
  const { ctx, env, options, proxies, stages } = run;
  const parsing = parseConcurrency(options.concurrency);
  // The parser is CPU-bound: in threads of its own (--parser-threads N) it takes a second core.
  // With PARSE_IN_FETCHER=1 the parsing happens in the fetcher, so the threads run the fetcher, and
  // the main thread keeps a parser only for parse jobs handed over before (a replay, an older fleet).
  const fetchInThreads = env.parseInFetcher && options.parserThreads > 0;
  if (options.parserThreads > 0) await startThreads(run, parsing, fetchInThreads);
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
}

/** The worker threads: parsers, or fetchers that parse (PARSE_IN_FETCHER=1). A thread's failure is kept in `run`. */
async function startThreads(run: CrawlRun, parsing: number, fetchInThreads: boolean): Promise<void> {
  const { options } = run;
  const perThread = fetchInThreads
    ? { stage: 'fetch' as const, concurrency: concurrencyPerThread(options.concurrency, options.parserThreads), proxies: run.proxies }
    : { stage: 'parse' as const, concurrency: concurrencyPerThread(parsing, options.parserThreads) };
  const threads = await startParserThreads(options.parserThreads, { redis: options.redis, mongo: options.mongo, ...perThread }, run.ctx.log);
  threads.failed.catch((err: Error) => (run.threadFailure = err));
  // Closing a thread that already failed fails again: the crawl reports that failure once (onTick).
  run.stages.push({
    close: () =>
      threads.close().catch((err: unknown) => {
        if (!run.threadFailure) throw err;
      }),
  });
}

/** Waits for the crawl's end, ticking its progress line; returns the state it ended in. */
async function waitWithProgress(run: CrawlRun, crawlId: string): Promise<CrawlState | 'timeout' | 'unknown'> {
  const { ctx, options } = run;
  const progress = progressTicker(ctx.redis, ctx.keys, crawlId, !options.quiet && process.stderr.isTTY === true);
  const state = await waitForEnd(ctx.redis, ctx.keys, crawlId, {
    onTick: async () => {
      // A parser thread that died ends the crawl: nothing is lost (its jobs run again), and a
      // restart loop would hide the bug or the page that keeps killing it.
      if (run.threadFailure) throw new ExitError(EXIT.failure, `${run.threadFailure.message}; the crawl stopped: run it again with --crawl-id ${crawlId} to resume`);
      await progress.tick();
    },
  });
  progress.end();
  return state;
}

/** The crawl's status as JSON (--json), else its closing line on stderr (unless --quiet). */
async function printSummary(run: CrawlRun, crawlId: string, state: string): Promise<void> {
  const { ctx, options } = run;
  const status = await fullStatus(ctx, crawlId);
  if (options.json) process.stdout.write(`${JSON.stringify(status)}\n`);
  else if (!options.quiet && status) {
    const c = status.counters;
    const failed = c.failed > 0 ? `${c.failed} failed (${await failureReasons(ctx, crawlId, c.failed)})` : '0 failed';
    process.stderr.write(`crawl ${crawlId} ${state}: ${c.fetched} pages fetched, ${c.items} items, ${c.written} written, ${failed}, ${c.skipped} skipped\n`);
    if (c.failed > 0) process.stderr.write(`the failures: crawlfleet dead-letters --crawl-id ${crawlId}\n`);
  }
}

/** Up to this many dead letters are read for the closing line's reasons; past it, only their count. */
const REASONS_READ_LIMIT = 50_000;

async function failureReasons(ctx: { redis: RedisClient; keys: Keys }, crawlId: string, failed: number): Promise<string> {
  if (failed > REASONS_READ_LIMIT) return 'too many to summarize here';
  return summarizeReasons(await listDeadLetters(ctx.redis, ctx.keys, crawlId));
}
