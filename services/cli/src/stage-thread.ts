import { Worker } from 'node:worker_threads';
import type { Logger } from '@crawlfleet/core';

/** What a stage thread says to its parent; the parent only ever says `close`. */
export type StageThreadMessage = { type: 'ready' };
export const CLOSE_MESSAGE = { type: 'close' } as const;

/** A stage running in a worker thread of this process, with its own Redis connections. */
export interface StageThread {
  threadId: number;
  /** rejects when the thread ends without being asked to (an uncaught error, an exit, out of memory) */
  failed: Promise<never>;
  /** asks the stage to stop (in-flight jobs finish) and waits for the thread to end */
  close(): Promise<void>;
}

export class StageThreadError extends Error {
  readonly code = 'ERR_STAGE_THREAD';
  constructor(
    readonly label: string,
    readonly threadId: number,
    readonly exitCode: number,
    cause?: Error,
  ) {
    super(`${label} thread ${threadId} ended ${cause ? `with an error: ${cause.message}` : `with exit code ${exitCode}`}`, cause ? { cause } : undefined);
  }
}

/**
 * Starts `script` in a worker thread and resolves once it says it is ready. The thread's own
 * errors end it (Node's default for a thread); its parent learns of it through `failed`.
 */
export function startStageThread(label: string, script: URL, workerData: unknown, log: Logger): Promise<StageThread> {
  // stdout and stderr stay the process's own: the thread's pino writes JSON lines to fd 2 itself.
  const worker = new Worker(script, { workerData });
  const { threadId } = worker;
  let closing = false;
  let error: Error | undefined;
  worker.on('error', (err) => {
    error = err;
    log.error({ thread: label, threadId, err }, `${label} thread failed`);
  });
  const exited = new Promise<number>((resolve) => worker.once('exit', resolve));
  const failed = exited.then((code) => {
    if (closing && code === 0 && !error) return new Promise<never>(() => undefined);
    throw new StageThreadError(label, threadId, code, error);
  });
  // Whoever watches `failed` sees it; a failure after the crawl ended must not crash the process.
  failed.catch(() => undefined);
  const thread: StageThread = {
    threadId,
    failed,
    async close() {
      if (!closing) {
        closing = true;
        worker.postMessage(CLOSE_MESSAGE);
      }
      const code = await exited;
      if (code !== 0 || error) throw new StageThreadError(label, threadId, code, error);
    },
  };
  return new Promise<StageThread>((resolve, reject) => {
    worker.on('message', (message: StageThreadMessage) => {
      if (message.type === 'ready') resolve(thread);
    });
    failed.catch(reject);
  });
}
