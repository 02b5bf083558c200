import { loadEnv } from '@crawlfleet/core';
import { withContext } from '../../services/cli/src/context.js';
import { fullStatus, type FullStatus } from '../../services/cli/src/full-status.js';

/**
 * A crawl's status as `crawlfleet status --crawl-id ID --json` prints it (the same function builds
 * it), read in the test's own process. A test that watches a crawl looks many times a second, and a
 * CLI process per look costs about a second of CPU: on a 2-core machine the looking slowed the crawls
 * it watched. The tests that are about the status command still run it.
 */
export async function crawlStatus(env: NodeJS.ProcessEnv, crawlId: string): Promise<FullStatus> {
  const status = await withContext({ ...loadEnv(env), logLevel: 'silent' }, (ctx) => fullStatus(ctx, crawlId));
  if (status === undefined) throw new Error(`no crawl with id ${JSON.stringify(crawlId)}`);
  // as the JSON the command prints: dates as strings, no undefined fields
  return JSON.parse(JSON.stringify(status)) as FullStatus;
}
