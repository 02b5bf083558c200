import type { Logger } from '@crawlfleet/core';
import type { ParserThreadData } from './parser-thread.js';
import { startStageThread, type StageThread } from './stage-thread.js';

const PARSER_THREAD = new URL('./parser-thread.js', import.meta.url);

/**
 * Parse jobs in flight for a crawl of `fetchConcurrency` fetches: a parse holds the core only while
 * cheerio runs, and waits on Redis the rest of the time, so a few in flight keep the core busy.
 */
export function parseConcurrency(fetchConcurrency: number): number {
  return Math.max(2, Math.ceil(fetchConcurrency / 4));
}

/** The parse concurrency shared among `threads` threads, each with at least 2 in flight. */
export function concurrencyPerThread(total: number, threads: number): number {
  return Math.max(2, Math.ceil(total / threads));
}

/** N parser threads, watched and stopped as one. */
export interface ParserThreads {
  threadIds: number[];
  /** rejects as soon as any thread ends without being asked to */
  failed: Promise<never>;
  close(): Promise<void>;
}

export async function startParserThreads(count: number, data: ParserThreadData, log: Logger): Promise<ParserThreads> {
  const threads: StageThread[] = [];
  try {
    for (let i = 0; i < count; i++) threads.push(await startStageThread('parser', PARSER_THREAD, data, log));
  } catch (err) {
    await Promise.allSettled(threads.map((t) => t.close()));
    throw err;
  }
  const failed = Promise.race(threads.map((t) => t.failed));
  failed.catch(() => undefined);
  return {
    threadIds: threads.map((t) => t.threadId),
    failed,
    async close() {
      const results = await Promise.allSettled(threads.map((t) => t.close()));
      const rejected = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (rejected) throw rejected.reason;
    },
  };
}
