import type { Item } from '@crawlfleet/core';

/** Where a writer stores items. `write` resolves only once the items are durably stored. */
export interface ItemSink {
  write(items: Item[]): Promise<void>;
  close(): Promise<void>;
}

/** Item type -> the field that identifies an item of it (`url` by default). */
export type KeyFields = Record<string, string>;

/**
 * A key value as text, the same whichever file it went through: a CSV file gives back every value
 * as text (`123` comes back as "123", an array as `a|b`), so an identity built on the raw value
 * would differ after a reopen. Scalars are their text, arrays joined with `|`, objects JSON; a
 * missing key is the empty text.
 */
export function keyText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (Array.isArray(value)) return value.map(keyText).join('|');
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

/** The identity of an item within its crawl's output: its type and its key value. */
export function itemIdentity(item: Item, keyFields: KeyFields): string {
  const type = keyText(item.type);
  const keyField = keyFields[type] ?? 'url';
  return `${type}\u0001${keyText(item[keyField])}`;
}

/**
 * The sink cannot take items now (another writer holds its file), and will later: the job waits
 * without spending an attempt (the writer parks it for `waitMs`).
 */
export class SinkBusyError extends Error {
  readonly code = 'ERR_SINK_BUSY';
  constructor(
    message: string,
    readonly waitMs: number,
  ) {
    super(message);
  }
}
