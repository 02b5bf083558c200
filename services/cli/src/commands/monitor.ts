import { STAGES } from '@crawlfleet/core';
import { getStatus, listCrawlIds, type CrawlStatus } from '@crawlfleet/crawl';
import { createFleetContext, type FleetContext } from '@crawlfleet/runtime';
import { formatProxies, type ProxyView } from '@crawlfleet/politeness';
import { fleetProxies } from '../full-status.js';
import { envWith } from '../options.js';
import { RateMeter, progressLine } from '../progress.js';
import { formatStatus } from './status.js';

export interface MonitorOptions {
  crawlId?: string;
  interval: number;
  once?: boolean;
  redis?: string;
}

/** Pure: one monitor frame. */
export function monitorFrame(input: { at: Date; statuses: { status: CrawlStatus; pagesPerSecond: number }[]; workers: Record<string, number>; proxies: ProxyView[] }): string {
  const lines = [
    `crawlfleet monitor  ${input.at.toISOString()}  workers: ${Object.entries(input.workers)
      .map(([s, n]) => `${s} ${n}`)
      .join(', ')}`,
    '',
  ];
  if (input.statuses.length === 0) lines.push('no running crawls');
  for (const { status, pagesPerSecond } of input.statuses) {
    lines.push(formatStatus(status));
    lines.push(`  ${progressLine(status, pagesPerSecond)}`, '');
  }
  lines.push(formatProxies(input.proxies));
  return lines.join('\n');
}

async function frame(ctx: FleetContext, options: MonitorOptions, meters: Map<string, RateMeter>): Promise<string> {
  const ids = options.crawlId ? [options.crawlId] : await listCrawlIds(ctx.redis, ctx.keys);
  const all = (await Promise.all(ids.map((id) => getStatus(ctx.redis, ctx.keys, id)))).filter((s): s is CrawlStatus => s !== undefined);
  // Without --crawl-id: the crawls that run or wait; the finished ones are in `status`.
  const shown = options.crawlId ? all : all.filter((s) => s.state === 'running' || s.state === 'paused');
  const workers: Record<string, number> = {};
  for (const stage of STAGES) workers[stage] = (await ctx.queues[stage].getWorkers().catch(() => [])).length;
  // Renderers only where a fleet runs them.
  const renderers = (await ctx.queues.render.getWorkers().catch(() => [])).length;
  if (renderers > 0) workers.render = renderers;
  const statuses = shown.map((status) => {
    let meter = meters.get(status.crawlId);
    if (!meter) {
      meter = new RateMeter();
      meters.set(status.crawlId, meter);
    }
    return { status, pagesPerSecond: meter.add(status.counters.fetched) };
  });
  // The proxies belong to the fleet: read once a frame, whatever the number of crawls shown.
  return monitorFrame({ at: new Date(), statuses, workers, proxies: await fleetProxies(ctx) });
}

/** A live terminal dashboard: queue depths, rates, ETA, workers, proxies. Ctrl-C ends it (exit 0). */
export async function monitorCommand(options: MonitorOptions): Promise<number> {
  const ctx = await createFleetContext({ env: envWith(options), name: 'monitor' });
  const meters = new Map<string, RateMeter>();
  const tty = process.stdout.isTTY === true;
  try {
    if (options.once) {
      process.stdout.write(`${await frame(ctx, options, meters)}\n`);
      return 0;
    }
    let stopped = false;
    const stop = () => (stopped = true);
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    while (!stopped) {
      const text = await frame(ctx, options, meters);
      process.stdout.write(tty ? `\x1b[H\x1b[2J${text}\n` : `${text}\n\n`);
      await new Promise((r) => setTimeout(r, options.interval * 1000));
    }
    return 0;
  } finally {
    await ctx.close();
  }
}
