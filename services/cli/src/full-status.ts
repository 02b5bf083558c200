import { getStatus, type CrawlStatus } from '@crawlfleet/crawl';
import { proxyView, readProxyHealth, type ProxyView } from '@crawlfleet/politeness';
import type { FleetContext } from '@crawlfleet/runtime';

/** The contract's status object, extended with the fleet's proxies (credentials redacted). */
export type FullStatus = CrawlStatus & { proxies: ProxyView[] };

/** Every proxy the fleet has registered, as status and monitor show it. */
export async function fleetProxies(ctx: FleetContext): Promise<ProxyView[]> {
  const now = Date.now();
  return (await readProxyHealth(ctx.redis, ctx.keys)).map((p) => proxyView(p, now));
}

export async function fullStatus(ctx: FleetContext, crawlId: string): Promise<FullStatus | undefined> {
  const [status, proxies] = await Promise.all([getStatus(ctx.redis, ctx.keys, crawlId), fleetProxies(ctx)]);
  return status ? { ...status, proxies } : undefined;
}
