import { ConfigError } from '@crawlfleet/core';
import { isDue, knownPageOf, loadCrawl, resetCrawl } from '@crawlfleet/crawl';
import type { Candidate } from '@crawlfleet/frontier';
import { seedCrawl, sitemapLastmods } from '@crawlfleet/seeder';
import { closeMongoConnections, pagesLocation, readPageRecords } from '@crawlfleet/storage';
import { withContext } from '../context.js';
import { envWith } from '../options.js';

export interface RecrawlOptions {
  crawlId: string;
  due?: boolean;
  sitemap?: string[];
  redis?: string;
}

/**
 * Starts the next run of an ended crawl whose spider keeps page records (`recrawl`): the crawl is
 * reset (its items stay) and seeded with its known URLs, each with what its last visit learnt, so
 * that its fetch asks for the page only if it changed (If-None-Match, If-Modified-Since). With
 * `--due`, only the URLs whose interval has passed, or that a sitemap given says changed since; the
 * others are admitted as settled (counted skipped), so links to them do not fetch them either.
 * The workers (or `crawl --crawl-id ID`) then run it.
 */
export async function recrawlCommand(options: RecrawlOptions): Promise<number> {
  const env = envWith(options);
  const id = options.crawlId;
  const summary = await withContext(env, async (ctx) => {
    const crawl = await loadCrawl(ctx.redis, ctx.keys, id);
    if (!crawl) throw new ConfigError(`recrawl: there is no crawl ${id} in this Redis (QUEUE_PREFIX ${env.queuePrefix})`);
    if (crawl.state === 'running' || crawl.state === 'paused') {
      throw new ConfigError(`recrawl: crawl ${id} is ${crawl.state}; a recrawl starts once it has ended (wait for it, or cancel it)`);
    }
    if (!crawl.spider.recrawl) {
      throw new ConfigError(`recrawl: the spider of crawl ${id} has no "recrawl" settings, so its pages were not recorded: add "recrawl": {} to the spider and crawl it once`);
    }
    const location = pagesLocation(crawl.sink, { mongoUrl: env.mongoUrl });
    const records = await readPageRecords(location, id);
    if (records.length === 0) throw new ConfigError(`recrawl: crawl ${id} has no page records in ${location.kind === 'file' ? location.path : 'its MongoDB database'}`);
    const lastmods = options.sitemap?.length ? await sitemapLastmods(ctx, crawl.spider, options.sitemap) : new Map<string, string>();
    const now = new Date();
    let due = 0;
    const known: Candidate[] = records.map((record) => {
      if (options.due && !isDue(record, now, lastmods.get(record.url))) return { url: record.url, depth: record.depth, verdict: 'out-of-scope' };
      due++;
      return { url: record.url, depth: record.depth, verdict: 'admit', known: knownPageOf(record) };
    });
    await resetCrawl(ctx.redis, ctx.keys, ctx.queues, id);
    await seedCrawl(ctx, { spider: crawl.spider, ...(crawl.module ? { module: crawl.module } : {}), crawlId: id, sink: () => crawl.sink, known });
    return { known: records.length, due };
  }).finally(() => closeMongoConnections());
  process.stderr.write(`recrawl of ${id}: ${summary.due} of ${summary.known} known URLs to fetch again, each only if it changed${options.due ? ' (due ones only)' : ''}\n`);
  process.stdout.write(`${id}\n`);
  return 0;
}
