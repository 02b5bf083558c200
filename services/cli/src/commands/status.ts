import { ConfigError } from '@crawlfleet/core';
import { getStatus, listCollectedCrawlIds, listCrawlIds, type CrawlStatus } from '@crawlfleet/crawl';
import { formatProxies } from '@crawlfleet/politeness';
import { fullStatus, type FullStatus } from '../full-status.js';
import { withContext } from '../context.js';
import { envWith } from '../options.js';

/** Pure: the status as a person reads it. */
export function formatStatus(s: CrawlStatus | FullStatus): string {
  const c = s.counters;
  const q = (name: keyof CrawlStatus['queues']) => {
    const x = s.queues[name];
    return `${name}: ${x.waiting} waiting, ${x.active} active, ${x.delayed} delayed, ${x.failed} failed`;
  };
  const heading = `${s.crawlId} (${s.spider}): ${s.state}, started ${s.startedAt}${s.finishedAt ? `, finished ${s.finishedAt}` : ''}`;
  const counters = [
    `  seen ${c.seen}  fetched ${c.fetched}  parsed ${c.parsed}  items ${c.items}  written ${c.written}`,
    `  invalid ${c.invalid}  failed ${c.failed}  blocked ${c.blocked}  retries ${c.retries}  skipped ${c.skipped}`,
  ];
  // A collected crawl has its final counters and nothing else left in Redis.
  if (s.collected) return [`${heading}, collected ${s.collected.at}`, ...counters, `  summary only (gc): ${s.collected.items} items in ${s.collected.sink}`].join('\n');
  return [heading, ...counters, `  ${q('fetch')}`, `  ${q('parse')}`, `  ${q('write')}`, ...formatHosts(s.hosts), ...('proxies' in s ? [formatProxies(s.proxies)] : [])].join('\n');
}

/** Pure: the hosts with the most URLs waiting, a line each: the hosts that hold a crawl's end back. */
export function formatHosts(hosts: CrawlStatus['hosts']): string[] {
  if (hosts.length === 0) return [];
  const turn = (h: CrawlStatus['hosts'][number]) =>
    h.nextTurnInMs === null ? `at its concurrency (${h.concurrency})` : h.nextTurnInMs === 0 ? 'its turn now' : `next turn in ${(h.nextTurnInMs / 1000).toFixed(1)} s`;
  return ['  hosts with the most URLs waiting:', ...hosts.map((h) => `    ${h.host}: ${h.waiting} waiting, ${h.inFlight} in flight, ${turn(h)}${h.delayMs ? `, ${h.delayMs} ms apart` : ''}`)];
}

export async function statusCommand(options: { crawlId?: string; json?: boolean; redis?: string }): Promise<number> {
  // One crawl: the status object with the fleet's proxies; every crawl: the contract's array.
  const statuses = await withContext(envWith(options), async (ctx) => {
    if (options.crawlId) return [await fullStatus(ctx, options.crawlId)].filter((s): s is FullStatus => s !== undefined);
    // The crawl index and the collected one (a crawl whose collection was cut short is in both).
    const ids = [...new Set([...(await listCrawlIds(ctx.redis, ctx.keys)), ...(await listCollectedCrawlIds(ctx.redis, ctx.keys))])].sort();
    const found = await Promise.all(ids.map((id) => getStatus(ctx.redis, ctx.keys, id)));
    return found.filter((s): s is CrawlStatus => s !== undefined);
  });
  if (options.crawlId && statuses.length === 0) throw new ConfigError(`no crawl with id ${JSON.stringify(options.crawlId)}`);
  if (options.json) process.stdout.write(`${JSON.stringify(options.crawlId ? statuses[0] : statuses)}\n`);
  else process.stdout.write(statuses.length ? `${statuses.map(formatStatus).join('\n\n')}\n` : 'no crawls\n');
  return 0;
}
