import { itemKeyFields, type SinkSpec, type Spider } from '@crawlfleet/core';
import { FileSink } from './file-sink.js';
import { csvColumns, csvFormat, jsonlFormat } from './formats.js';
import type { ItemSink } from './sink.js';

/** Opens the sink a crawl names. The MongoDB sink plugs in here (issue #3). */
export async function openSink(spec: SinkSpec, spider: Spider): Promise<ItemSink> {
  const keyFields = itemKeyFields(spider);
  switch (spec.kind) {
    case 'jsonl':
      return FileSink.open(spec.path, jsonlFormat, keyFields);
    case 'csv':
      return FileSink.open(spec.path, csvFormat(csvColumns(spider.items.flatMap((r) => Object.keys(r.fields)))), keyFields);
    case 'mongo':
      throw new Error('the MongoDB sink is not available in this build; use --out FILE.jsonl or FILE.csv');
  }
}
