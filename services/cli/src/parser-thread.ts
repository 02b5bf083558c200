// The parse stage in a worker thread of `crawl` (started by parser-threads.ts): the parser is
// CPU-bound, so in a thread of its own it has a core while the fetcher and writer keep the other.
// It is an ordinary BullMQ worker with its own connections; the queues in Redis do the hand-off.
// With PARSE_IN_FETCHER=1 the pages are parsed where they are fetched, so the thread runs the
// fetcher (which parses) instead.
import { parentPort, threadId, workerData } from 'node:worker_threads';
import { createLogger } from '@crawlfleet/core';
import { startFetcher } from '@crawlfleet/fetcher';
import { startParser } from '@crawlfleet/parser';
import type { ProxyEntry } from '@crawlfleet/politeness';
import { createFleetContext } from '@crawlfleet/runtime';
import { envWith } from './options.js';
import { CLOSE_MESSAGE, type StageThreadMessage } from './stage-thread.js';

export interface ParserThreadData {
  redis?: string | undefined;
  mongo?: string | undefined;
  concurrency: number;
  /** the stage the thread runs: the parser, or with PARSE_IN_FETCHER=1 a fetcher that parses */
  stage: 'parse' | 'fetch';
  /** a fetcher thread's proxy pool (--proxies, PROXY_LIST) */
  proxies?: ProxyEntry[];
}

const data = workerData as ParserThreadData;
const env = envWith(data);
const log = createLogger({ level: env.logLevel, name: 'crawl' }).child({ thread: data.stage === 'fetch' ? 'fetcher' : 'parser', threadId });
const ctx = await createFleetContext({ env, log, name: 'crawl' });
const stage = data.stage === 'fetch' ? startFetcher(ctx, { concurrency: data.concurrency, proxies: data.proxies ?? [] }) : startParser(ctx, { concurrency: data.concurrency });
log.info({ stage: data.stage, concurrency: data.concurrency }, `${data.stage === 'fetch' ? 'fetcher' : 'parser'} thread ready`);
const port = parentPort!;
port.on('message', (message: typeof CLOSE_MESSAGE) => {
  if (message.type !== CLOSE_MESSAGE.type) return;
  // In-flight jobs finish, then the connections close; an error here is the thread's error.
  void stage
    .close()
    .then(() => ctx.close())
    .then(() => process.exit(0));
});
port.postMessage({ type: 'ready' } satisfies StageThreadMessage);
