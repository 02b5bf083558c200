import { ConfigError } from '@crawlfleet/core';
import { CollectedCrawlError, listDeadLetters, loadCrawl, replayDeadLetters, type DeadLetterEntry, type DeadLetterFilter } from '@crawlfleet/crawl';
import { withContext } from '../context.js';
import { envWith } from '../options.js';

interface FilterOptions {
  crawlId: string;
  code?: string;
  urlRegex?: string;
  redis?: string;
}

function filterOf(options: FilterOptions): DeadLetterFilter {
  let urlRegex: RegExp | undefined;
  if (options.urlRegex !== undefined) {
    try {
      urlRegex = new RegExp(options.urlRegex);
    } catch (err) {
      throw new ConfigError(`--url-regex ${JSON.stringify(options.urlRegex)}: ${(err as Error).message}`);
    }
  }
  return { ...(options.code ? { code: options.code } : {}), ...(urlRegex ? { urlRegex } : {}) };
}

/** Pure: dead letters as a person reads them, one per line, with a count per code. */
export function formatDeadLetters(entries: DeadLetterEntry[]): string {
  if (entries.length === 0) return 'no dead letters';
  const byCode = new Map<string, number>();
  for (const e of entries) byCode.set(e.code, (byCode.get(e.code) ?? 0) + 1);
  const lines = entries.map((e) => `${e.code}\t${e.stage}\t${e.attempts}\t${e.at}\t${e.url}\t${e.reason.length > 160 ? `${e.reason.slice(0, 157)}...` : e.reason}`);
  const summary = [...byCode].map(([code, n]) => `${n} ${code}`).join(', ');
  return [`code\tstage\tattempts\tat\turl\treason`, ...lines, `${entries.length} dead letters: ${summary}`].join('\n');
}

/**
 * Pure: the commonest reasons among dead letters, for a crawl's closing line: `HTTP 404 ×790,
 * ERR_TIMEOUT ×3 and 2 other reasons`. A reason is its text (the code when it has none), long ones cut.
 */
export function summarizeReasons(entries: Pick<DeadLetterEntry, 'code' | 'reason'>[], top = 3): string {
  const counts = new Map<string, number>();
  for (const e of entries) {
    const text = e.reason.startsWith(`${e.code}: `) ? e.reason.slice(e.code.length + 2) : e.reason || e.code;
    const reason = text.length > 60 ? `${text.slice(0, 57)}...` : text;
    counts.set(reason, (counts.get(reason) ?? 0) + 1);
  }
  const sorted = [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const shown = sorted
    .slice(0, top)
    .map(([reason, n]) => `${reason} ×${n}`)
    .join(', ');
  const others = sorted.length - top;
  return others > 0 ? `${shown} and ${others} other reason${others === 1 ? '' : 's'}` : shown;
}

async function requireCrawl<T>(options: FilterOptions, fn: (ctx: Parameters<Parameters<typeof withContext>[1]>[0]) => Promise<T>): Promise<T> {
  return withContext(envWith(options), async (ctx) => {
    if (!(await ctx.redis.exists(ctx.keys.crawl(options.crawlId).meta))) throw new ConfigError(`no crawl with id ${JSON.stringify(options.crawlId)} (crawlfleet status lists them)`);
    // gc removed a collected crawl's dead letters with the rest of its state.
    const collectedAt = await ctx.redis.hget(ctx.keys.crawl(options.crawlId).meta, 'collectedAt');
    if (collectedAt) throw new CollectedCrawlError(options.crawlId, collectedAt);
    return fn(ctx);
  });
}

/** `crawlfleet dead-letters`: the URLs a crawl gave up on, with stage, code, reason and attempts. */
export async function deadLettersCommand(options: FilterOptions & { json?: boolean }): Promise<number> {
  const filter = filterOf(options);
  const entries = await requireCrawl(options, (ctx) => listDeadLetters(ctx.redis, ctx.keys, options.crawlId, filter));
  if (options.json) {
    // Page bodies are never kept; the job payload stays out of the listing (replay reads it).
    process.stdout.write(`${JSON.stringify(entries.map(({ data: _data, ...e }) => e))}\n`);
  } else {
    process.stdout.write(`${formatDeadLetters(entries)}\n`);
  }
  return 0;
}

/** `crawlfleet replay`: the selected dead letters run again; a replayed URL is fetched again. */
export async function replayCommand(options: FilterOptions): Promise<number> {
  const filter = filterOf(options);
  const result = await requireCrawl(options, async (ctx) => {
    const crawl = await loadCrawl(ctx.redis, ctx.keys, options.crawlId);
    if (!crawl) throw new ConfigError(`no crawl with id ${JSON.stringify(options.crawlId)}`);
    return replayDeadLetters(ctx.redis, ctx.keys, ctx.queues, crawl, filter);
  });
  for (const { entry, reason } of result.refused) process.stderr.write(`not replayed: ${entry.jobId} ${entry.url || '(no URL)'}: ${reason}\n`);
  process.stdout.write(`replayed ${result.replayed.length} dead letters of crawl ${options.crawlId}${result.replayed.length > 0 ? '; it runs until they end' : ''}\n`);
  return 0;
}
