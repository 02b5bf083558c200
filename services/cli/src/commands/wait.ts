import { ConfigError } from '@crawlfleet/core';
import { withContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { envWith } from '../options.js';
import { progressTicker } from '../progress.js';
import { waitForEnd } from '../wait-for-end.js';

/**
 * Exit 0 when done, 1 when failed or cancelled, 124 on timeout. On a terminal it redraws the crawl's
 * progress line every second (what `crawl` shows); in a script or a log it writes only the outcome.
 */
export async function waitCommand(options: { crawlId: string; timeout?: number; redis?: string }): Promise<number> {
  const state = await withContext(envWith(options), async (ctx) => {
    const progress = progressTicker(ctx.redis, ctx.keys, options.crawlId, process.stderr.isTTY === true);
    const ended = await waitForEnd(ctx.redis, ctx.keys, options.crawlId, { onTick: progress.tick, ...(options.timeout === undefined ? {} : { timeoutMs: options.timeout * 1000 }) });
    progress.end();
    return ended;
  });
  if (state === 'unknown') throw new ConfigError(`no crawl with id ${JSON.stringify(options.crawlId)}`);
  if (state === 'timeout') {
    process.stderr.write(`crawl ${options.crawlId} still running after ${options.timeout} s\n`);
    return EXIT.timeout;
  }
  process.stderr.write(`crawl ${options.crawlId} ${state}\n`);
  return state === 'done' ? EXIT.ok : EXIT.failure;
}
