import { loadSpiderDefinition, sinkSpecFor, defaultSinkSpec, withWarcOutput } from '@crawlfleet/core';
import { seedCrawl } from '@crawlfleet/seeder';
import { withContext } from '../context.js';
import { envWith } from '../options.js';

export interface SeedCommandOptions {
  crawlId?: string;
  sink?: string;
  warc?: string;
  warcRollover?: number;
  urlsFile?: string;
  sitemap?: string[];
  redis?: string;
}

/** Registers the crawl and enqueues its seeds; the crawl id is the last line of stdout. */
export async function seedCommand(spiderFile: string, urls: string[], options: SeedCommandOptions): Promise<number> {
  const { spider, module } = await loadSpiderDefinition(spiderFile);
  const sinkFor = (crawlId: string) => withWarcOutput(options.sink ? sinkSpecFor(options.sink) : defaultSinkSpec(crawlId), options);
  sinkFor('check');
  const result = await withContext(envWith(options), (ctx) =>
    seedCrawl(ctx, {
      spider,
      ...(module ? { module: module.ref } : {}),
      sink: sinkFor,
      urls,
      ...(options.crawlId ? { crawlId: options.crawlId } : {}),
      ...(options.urlsFile ? { urlsFile: options.urlsFile } : {}),
      ...(options.sitemap ? { sitemaps: options.sitemap } : {}),
    }),
  );
  process.stdout.write(`${result.crawlId}\n`);
  return 0;
}
