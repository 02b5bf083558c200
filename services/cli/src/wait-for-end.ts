import type { Keys, RedisClient } from '@crawlfleet/core';
import { getCrawlState, type CrawlState } from '@crawlfleet/crawl';

const TERMINAL: CrawlState[] = ['done', 'failed', 'cancelled'];

/**
 * Resolves with the crawl's terminal state, or 'timeout'. The state is set by the worker that
 * finished the crawl's last job, so this only reads it.
 */
export async function waitForEnd(
  redis: RedisClient,
  keys: Keys,
  crawlId: string,
  options: { timeoutMs?: number; pollMs?: number; onTick?: () => Promise<void> | void } = {},
): Promise<CrawlState | 'timeout' | 'unknown'> {
  const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
  for (;;) {
    const state = await getCrawlState(redis, keys, crawlId);
    if (!state) return 'unknown';
    if (TERMINAL.includes(state)) return state;
    if (Date.now() >= deadline) return 'timeout';
    await options.onTick?.();
    await new Promise((r) => setTimeout(r, Math.min(options.pollMs ?? 250, Math.max(1, deadline - Date.now()))));
  }
}
