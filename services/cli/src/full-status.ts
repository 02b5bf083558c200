import { getStatus, type CrawlStatus } from '@crawlfleet/crawl';
import { proxyView, readProxyHealth, type ProxyView } from '@crawlfleet/politeness';
import type { FleetContext } from '@crawlfleet/runtime';

/** The contract's status object, extended with the fleet's proxies (credentials redacted). */
export type FullStatus = CrawlStatus & { proxies: ProxyView[] };

export async function fullStatus(ctx: FleetContext, crawlId: string): Promise<FullStatus | undefined> {
  const [status, proxies] = await Promise.all([getStatus(ctx.redis, ctx.keys, crawlId), readProxyHealth(ctx.redis, ctx.keys)]);
  if (!status) return undefined;
  const now = Date.now();
  return { ...status, proxies: proxies.map((p) => proxyView(p, now)) };
}
