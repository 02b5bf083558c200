import { loadEnv } from '@crawlfleet/core';
import { createFleetContext } from '@crawlfleet/runtime';
import { fullStatus, type FullStatus } from '../../services/cli/src/full-status.js';

/** How long one look may take: the fleet's client retries for ever while its Redis is down. */
const LOOK_TIMEOUT_MS = 20_000;

/**
 * A crawl's status as `crawlfleet status --crawl-id ID --json` prints it (the same function builds
 * it), read in the test's own process, for the loops that watch a crawl: they look every 50 ms, and
 * a CLI process per look costs about a second of CPU, which on a 2-core machine slowed the crawl being
 * watched. Tests about the status command still run it.
 */
export async function crawlStatus(env: NodeJS.ProcessEnv, crawlId: string): Promise<FullStatus> {
  const ctx = await createFleetContext({ env: { ...loadEnv(env), logLevel: 'silent' } });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the status of ${crawlId} took over ${LOOK_TIMEOUT_MS} ms`)), LOOK_TIMEOUT_MS);
  });
  let status: FullStatus | undefined;
  try {
    status = await Promise.race([fullStatus(ctx, crawlId), timeout]);
  } catch (err) {
    // a look that hung: drop the connection rather than wait on a graceful close
    ctx.redis.disconnect();
    void ctx.close().catch(() => undefined);
    throw err;
  } finally {
    clearTimeout(timer);
  }
  await ctx.close();
  if (status === undefined) throw new Error(`no crawl with id ${JSON.stringify(crawlId)}`);
  // as the JSON the command prints: no undefined fields
  return JSON.parse(JSON.stringify(status)) as FullStatus;
}
