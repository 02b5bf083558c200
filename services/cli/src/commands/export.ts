import { ConfigError, ServiceUnavailableError, redactUrl, sinkSpecFor } from '@crawlfleet/core';
import { closeMongoConnections, exportCrawl } from '@crawlfleet/storage';
import { envWith } from '../options.js';

export async function exportCommand(options: { crawlId: string; out: string; mongo?: string }): Promise<number> {
  const spec = sinkSpecFor(options.out);
  if (spec.kind === 'mongo') throw new ConfigError('--out must be a .jsonl or .csv file');
  const env = envWith({ mongo: options.mongo });
  let count: number;
  try {
    count = await exportCrawl(env.mongoUrl, options.crawlId, spec.path, spec.kind, (n) => process.stderr.write(`\r${n} items...`));
  } catch (err) {
    const name = (err as Error).name ?? '';
    if (/MongoServerSelection|MongoNetwork/.test(name)) throw new ServiceUnavailableError('mongodb', `cannot reach MongoDB at ${redactUrl(env.mongoUrl)}: ${(err as Error).message}`, { cause: err });
    throw err;
  } finally {
    await closeMongoConnections();
  }
  process.stderr.write(`\r${count} items of crawl ${options.crawlId} written to ${spec.path}\n`);
  return 0;
}
