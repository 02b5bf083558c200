import { startFetcher } from '@crawlfleet/fetcher';
import { startParser } from '@crawlfleet/parser';
import { createFleetContext, onShutdownSignal, type RunningStage } from '@crawlfleet/runtime';
import { startWriter } from '@crawlfleet/writer';
import { ConfigError } from '@crawlfleet/core';
import { envWith } from '../options.js';

export const WORKER_KINDS = ['fetcher', 'parser', 'writer'] as const;
type WorkerKind = (typeof WORKER_KINDS)[number];

const DEFAULT_CONCURRENCY: Record<WorkerKind, number> = { fetcher: 32, parser: 4, writer: 32 };

/** One long-lived stage worker serving every crawl; SIGTERM/SIGINT finish in-flight jobs, then exit 0. */
export async function workerCommand(kind: string, options: { concurrency?: number; redis?: string }): Promise<number> {
  if (!(WORKER_KINDS as readonly string[]).includes(kind)) throw new ConfigError(`worker: unknown stage "${kind}" (use ${WORKER_KINDS.join(', ')})`);
  const k = kind as WorkerKind;
  const ctx = await createFleetContext({ env: envWith(options), name: k });
  const concurrency = options.concurrency ?? DEFAULT_CONCURRENCY[k];
  const start = { fetcher: startFetcher, parser: startParser, writer: startWriter }[k];
  const stage: RunningStage = start(ctx, { concurrency });
  ctx.log.info({ stage: k, concurrency, pid: process.pid }, 'worker ready');
  onShutdownSignal(ctx.log, async () => {
    await stage.close();
    await ctx.close();
  });
  // Runs until a signal; the handler exits the process.
  return new Promise<number>(() => undefined);
}
