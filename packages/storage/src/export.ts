import { mkdir, open } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Item } from '@crawlfleet/core';
import { csvColumns, csvFormat, jsonlFormat } from './formats.js';
import { STORE_FIELDS } from './item-schema.js';
import { mongoConnection } from './mongo-sink.js';

// STORE_FIELDS: the bookkeeping the store adds to each item; an export gives the items as the crawl produced them.

function asItem(doc: Record<string, unknown>): Item {
  return Object.fromEntries(Object.entries(doc).filter(([k]) => !STORE_FIELDS.has(k)));
}

/**
 * Writes every item stored for a crawl (all collections, documents last seen by it) to a `.jsonl`
 * or `.csv` file, replacing the file. Returns the number of items.
 */
export async function exportCrawl(mongoUrl: string, crawlId: string, out: string, kind: 'jsonl' | 'csv', onProgress?: (n: number) => void): Promise<number> {
  const db = (await mongoConnection(mongoUrl)).db!;
  const names = (await db.listCollections({}, { nameOnly: true }).toArray())
    .map((c) => c.name)
    .filter((n) => !n.startsWith('system.'))
    .sort();
  const items: Item[] = [];
  for (const name of names) {
    for await (const doc of db.collection(name).find({ crawlId }).sort({ _id: 1 })) {
      items.push(asItem(doc));
      if (items.length % 10_000 === 0) onProgress?.(items.length);
    }
  }
  const format = kind === 'jsonl' ? jsonlFormat : csvFormat(csvColumns([...new Set(items.flatMap((i) => Object.keys(i)))]));
  await mkdir(dirname(out), { recursive: true });
  const file = await open(out, 'w');
  try {
    if (format.header) await file.write(format.header());
    for (let i = 0; i < items.length; i += 1000)
      await file.write(
        items
          .slice(i, i + 1000)
          .map((item) => format.line(item))
          .join(''),
      );
    await file.datasync();
  } finally {
    await file.close();
  }
  return items.length;
}
