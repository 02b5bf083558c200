import { ConfigError, parseDuration } from '@crawlfleet/core';
import { collectFinishedCrawls, type CollectedCrawl, type GcReport } from '@crawlfleet/crawl';
import { isoMoment } from '../arguments.js';
import { withContext } from '../context.js';
import { envWith } from '../options.js';

export interface GcCommandOptions {
  finishedBefore?: string;
  dryRun?: boolean;
  json?: boolean;
  quiet?: boolean;
  redis?: string;
}

/**
 * Pure: the cutoff: `--finished-before` (a duration before now, or a moment), else CRAWL_RETENTION
 * before now (`retentionMs`; undefined when it is `off`).
 */
export function gcCutoff(finishedBefore: string | undefined, retentionMs: number | undefined, nowMs: number): Date {
  if (finishedBefore !== undefined) {
    const ago = parseDuration(finishedBefore);
    const moment = ago === undefined ? isoMoment(finishedBefore) : nowMs - ago;
    if (moment === undefined) throw new ConfigError(`--finished-before ${JSON.stringify(finishedBefore)}: not a duration or an ISO 8601 moment`);
    return new Date(moment);
  }
  if (retentionMs === undefined) throw new ConfigError('CRAWL_RETENTION is off: give the cutoff with --finished-before DURATION (7d, 36h, ...)');
  return new Date(nowMs - retentionMs);
}

const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

/** Pure: one collected crawl's line. */
export function formatCollected(c: CollectedCrawl, dryRun: boolean): string {
  const what = `${c.crawlId}: ${c.state}, finished ${c.finishedAt ?? 'at an unknown time'}`;
  return dryRun ? `would collect ${what}` : `collected ${what}; ${count(c.keys, 'key')} and ${count(c.jobs, 'job')} removed`;
}

/** Pure: the last line: what gc did, and what it left. */
export function formatGcReport(r: GcReport): string {
  const n = r.collected.length;
  const kept = `${r.recent} finished later kept, ${r.live} running or paused`;
  if (r.dryRun) return `gc --dry-run: ${count(n, 'crawl')} finished before ${r.finishedBefore} would be collected; ${kept}`;
  const keys = r.collected.reduce((s, c) => s + c.keys, 0);
  const jobs = r.collected.reduce((s, c) => s + c.jobs, 0);
  return `gc: collected ${count(n, 'crawl')} finished before ${r.finishedBefore} (${count(keys, 'key')} and ${count(jobs, 'BullMQ job')} removed, a summary of each kept; ${count(r.events, 'older queue event')} trimmed); ${kept}`;
}

/**
 * `crawlfleet gc`: the finished crawls past the retention leave Redis, but for a summary that
 * `status` shows. A line per crawl (unless --quiet), then a total; --json: one document. On a
 * terminal, stderr shows how far it got.
 */
export async function gcCommand(options: GcCommandOptions): Promise<number> {
  const env = envWith(options);
  const finishedBefore = gcCutoff(options.finishedBefore, env.crawlRetentionMs, Date.now());
  const dryRun = options.dryRun === true;
  const lines = !options.json && !options.quiet;
  const progress = !options.json && !options.quiet && process.stderr.isTTY === true;
  const report = await withContext(env, (ctx) =>
    collectFinishedCrawls(ctx.redis, ctx.keys, ctx.queues, {
      finishedBefore,
      dryRun,
      onCollected: (crawl, done, total) => {
        if (progress) process.stderr.write('\r\x1b[2K');
        if (lines) process.stdout.write(`${formatCollected(crawl, dryRun)}\n`);
        if (progress) process.stderr.write(`gc: ${done}/${total} crawls${dryRun ? '' : ' collected'}`);
      },
    }),
  );
  if (progress && report.collected.length > 0) process.stderr.write('\r\x1b[2K');
  process.stdout.write(`${options.json ? JSON.stringify(report) : formatGcReport(report)}\n`);
  return 0;
}
