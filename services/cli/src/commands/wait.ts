import { ConfigError, errorMessage } from '@crawlfleet/core';
import { withContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { envWith } from '../options.js';
import { progressTicker } from '../progress.js';
import { waitForEnd } from '../wait-for-end.js';

/**
 * Exit 0 when done, 1 when failed or cancelled, 124 on timeout. On a terminal it redraws the crawl's
 * progress line every second (what `crawl` shows); in a script or a log it writes only the outcome.
 * A command that waits rides out what the workers ride out (a Redis restart, a failover), within
 * its own timeout: its first connection is tried again until the timeout (REDIS_STARTUP_TIMEOUT_MS
 * without one), and a read that fails is tried again (waitForEnd).
 */
export async function waitCommand(options: { crawlId: string; timeout?: number; redis?: string }): Promise<number> {
  const started = Date.now();
  const env = envWith(options);
  const startup = options.timeout === undefined ? undefined : { timeoutMs: options.timeout * 1000, setting: `--timeout (${options.timeout} s)` };
  const state = await withContext(
    env,
    async (ctx) => {
      const progress = progressTicker(ctx.redis, ctx.keys, options.crawlId, process.stderr.isTTY === true);
      const timeoutMs = options.timeout === undefined ? undefined : Math.max(0, options.timeout * 1000 - (Date.now() - started));
      const onReadError = (err: unknown) => ctx.log.debug({ err: errorMessage(err) }, 'wait: Redis did not answer; trying again');
      const ended = await waitForEnd(ctx.redis, ctx.keys, options.crawlId, { onTick: progress.tick, onReadError, ...(timeoutMs === undefined ? {} : { timeoutMs }) });
      progress.end();
      return ended;
    },
    { waitForRedis: true, ...(startup ? { startup } : {}) },
  );
  if (state === 'unknown') throw new ConfigError(`no crawl with id ${JSON.stringify(options.crawlId)}`);
  if (state === 'timeout') {
    process.stderr.write(`crawl ${options.crawlId} still running after ${options.timeout} s\n`);
    return EXIT.timeout;
  }
  process.stderr.write(`crawl ${options.crawlId} ${state}\n`);
  return state === 'done' ? EXIT.ok : EXIT.failure;
}
