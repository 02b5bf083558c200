import type { ProxyEntry } from '@crawlfleet/politeness';
import { createFleetContext, onShutdownSignal, refuseBesideLegacyCrawls, serveMetrics, startReconciler, type FleetContext, type RunningStage } from '@crawlfleet/runtime';
import { ConfigError, type Env } from '@crawlfleet/core';
import { envWith } from '../options.js';

export const WORKER_KINDS = ['fetcher', 'parser', 'writer', 'renderer'] as const;
type WorkerKind = (typeof WORKER_KINDS)[number];

/** A renderer's pages are open Chromium pages: a few per core. */
const DEFAULT_CONCURRENCY: Record<WorkerKind, number> = { fetcher: 32, parser: 4, writer: 32, renderer: 4 };
const QUEUE_OF = { fetcher: 'fetch', parser: 'parse', writer: 'write', renderer: 'render' } as const;

/**
 * The stage's own package, imported when the worker starts: a parser need not load the fetch stack,
 * Chromium's driver or mongoose, nor a fetcher mongoose. Each would cost every worker about half a
 * second of CPU to start and tens of MB it never uses.
 */
async function startStage(k: WorkerKind, ctx: FleetContext, env: Env, concurrency: number, proxies: ProxyEntry[]): Promise<RunningStage> {
  switch (k) {
    case 'fetcher':
      return (await import('@crawlfleet/fetcher')).startFetcher(ctx, { concurrency, proxies });
    case 'renderer':
      return (await import('@crawlfleet/fetcher')).startRenderer(ctx, { concurrency, executablePath: env.chromiumPath, retireAfterPages: env.renderRetireAfterPages, sandbox: env.chromiumSandbox });
    case 'parser':
      return (await import('@crawlfleet/parser')).startParser(ctx, { concurrency });
    case 'writer':
      return (await import('@crawlfleet/writer')).startWriter(ctx, { concurrency });
  }
}

/** One long-lived stage worker serving every crawl; SIGTERM/SIGINT finish in-flight jobs, then exit 0 (1 past SHUTDOWN_DRAIN_MS). */
export async function workerCommand(kind: string, options: { concurrency?: number; redis?: string; proxies?: string }): Promise<number> {
  if (!(WORKER_KINDS as readonly string[]).includes(kind)) throw new ConfigError(`worker: unknown stage "${kind}" (use ${WORKER_KINDS.join(', ')})`);
  const k = kind as WorkerKind;
  const env = envWith(options);
  const proxies = k === 'fetcher' ? (await import('@crawlfleet/politeness')).loadProxyList({ ...(options.proxies ? { file: options.proxies } : {}), env: env.proxyList }) : [];
  const ctx = await createFleetContext({ env, name: k, waitForRedis: true });
  // The signal handler comes first: a stage takes jobs as soon as it starts, and a SIGTERM before
  // the handler (Node's default: exit at once) would end them without their drain. A signal during
  // the start waits for it to end, then stops what it started; a start refused for its
  // configuration still exits 2.
  let stage: RunningStage | undefined;
  let metrics: Awaited<ReturnType<typeof serveMetrics>> | undefined;
  let stopReconciler: (() => void) | undefined;
  let startError: unknown;
  let started: Promise<void> = Promise.resolve();
  onShutdownSignal(
    ctx.log,
    async () => {
      await started.catch(() => undefined);
      stopReconciler?.();
      await stage?.close();
      await metrics?.close();
      await ctx.close();
    },
    { drainMs: env.shutdownDrainMs, exitCode: () => (startError === undefined ? 0 : startError instanceof ConfigError ? 2 : 1) },
  );
  started = (async () => {
    await refuseBesideLegacyCrawls(ctx);
    const concurrency = options.concurrency ?? DEFAULT_CONCURRENCY[k];
    stage = await startStage(k, ctx, env, concurrency, proxies);
    // A writer is not ready while the MongoDB it was given (MONGO_URL) does not answer.
    const checks = k === 'writer' && process.env.MONGO_URL ? [(await import('@crawlfleet/writer')).mongoReadiness(env.mongoUrl)] : [];
    metrics = await serveMetrics(ctx, [QUEUE_OF[k]], checks);
    // Every worker takes its turn as the fleet's reconciler (one at a time, under a lock).
    stopReconciler = startReconciler(ctx);
    // A fetcher that parses says so: an operator reading the log sees which path its pages take.
    const parses = (k === 'fetcher' || k === 'renderer') && env.parseInFetcher ? { parsesPages: true } : {};
    ctx.log.info({ stage: k, concurrency, pid: process.pid, proxies: proxies.map((p) => p.label), metricsPort: metrics?.port, ...parses }, 'worker ready');
  })().catch((err: unknown) => {
    startError = err;
    throw err;
  });
  await started;
  // Runs until a signal; the handler exits the process.
  return new Promise<number>(() => undefined);
}
