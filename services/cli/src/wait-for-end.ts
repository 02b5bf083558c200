import type { Keys, RedisClient } from '@crawlfleet/core';
import { getCrawlState, type CrawlState } from '@crawlfleet/crawl';

const TERMINAL: CrawlState[] = ['done', 'failed', 'cancelled'];

const LATE = Symbol('no answer before the deadline');
const FAILED = Symbol('the read failed');

/** `read`'s answer, or LATE when it has none by `deadline` (ms, epoch; Infinity waits for it). */
async function beforeDeadline<T>(read: Promise<T>, deadline: number): Promise<T | typeof LATE> {
  if (deadline === Infinity) return read;
  read.catch(() => undefined); // a read still pending at the deadline may fail later, unheard
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<typeof LATE>((resolve) => {
    timer = setTimeout(() => resolve(LATE), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([read, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Resolves with the crawl's terminal state, or 'timeout'. The state is set by the worker that
 * finished the crawl's last job, so this only reads it. A wait rides out what the workers ride out:
 * a read that fails (Redis restarting, a cluster failing over, a Sentinel promoting a replica) is
 * tried again every poll until the deadline (`onReadError` hears each failure), and no read is
 * awaited past the deadline, so the timeout holds while Redis does not answer.
 */
export async function waitForEnd(
  redis: RedisClient,
  keys: Keys,
  crawlId: string,
  options: { timeoutMs?: number; pollMs?: number; onTick?: () => Promise<void> | void; onReadError?: (err: unknown) => void } = {},
): Promise<CrawlState | 'timeout' | 'unknown'> {
  const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
  for (;;) {
    const state = await beforeDeadline(
      getCrawlState(redis, keys, crawlId).catch((err: unknown): typeof FAILED => {
        options.onReadError?.(err);
        return FAILED;
      }),
      deadline,
    );
    if (state === LATE) return 'timeout';
    if (state === undefined) return 'unknown';
    if (state !== FAILED && TERMINAL.includes(state)) return state;
    if (Date.now() >= deadline) return 'timeout';
    // The progress line is a courtesy: a tick that fails (Redis away) is skipped.
    if (state !== FAILED)
      await beforeDeadline(
        Promise.resolve(options.onTick?.()).catch(() => undefined),
        deadline,
      );
    await new Promise((r) => setTimeout(r, Math.min(options.pollMs ?? 250, Math.max(1, deadline - Date.now()))));
  }
}
