import type { Item } from '@crawlfleet/core';

/** Where a writer stores items. `write` resolves only once the items are durably stored. */
export interface ItemSink {
  write(items: Item[]): Promise<void>;
  close(): Promise<void>;
}

/** Item type -> the field that identifies an item of it (`url` by default). */
export type KeyFields = Record<string, string>;

/** The identity of an item within its crawl's output: its type and its key value. */
export function itemIdentity(item: Item, keyFields: KeyFields): string {
  const type = String(item.type ?? '');
  const keyField = keyFields[type] ?? 'url';
  return `${type}\u0001${JSON.stringify(item[keyField] ?? null)}`;
}
