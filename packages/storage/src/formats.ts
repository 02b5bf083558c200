import { parse as parseCsv } from 'csv-parse/sync';
import { stringify as stringifyCsv } from 'csv-stringify/sync';
import type { Item } from '@crawlfleet/core';

/** How items become lines of a file, and back (to resume). */
export interface FileFormat {
  header?: () => string;
  line: (item: Item) => string;
  parse: (text: string) => Item[];
  /**
   * One record (a line as `line` wrote it, its line ending included) back into an item, or
   * undefined when it is not one (a blank or garbled line). A CSV record gives every value as text.
   */
  parseRecord: (record: string) => Item | undefined;
  /** a record may hold newlines inside double quotes (CSV), so only a newline outside quotes ends it */
  quoted: boolean;
}

export const jsonlFormat: FileFormat = {
  line: (item) => `${JSON.stringify(item)}\n`,
  parse: (text) =>
    text
      .split('\n')
      .filter((l) => l.trim() !== '')
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as Item];
        } catch {
          return [];
        }
      }),
  parseRecord: (record) => {
    if (record.trim() === '') return undefined;
    try {
      const value: unknown = JSON.parse(record);
      return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Item) : undefined;
    } catch {
      return undefined;
    }
  },
  quoted: false,
};

const LEADING = ['type', 'url'];
const TRAILING = ['spider', 'crawlId', 'fetchedAt'];

/** The CSV columns of a spider: type and url, every field of every item rule in order, then the rest. */
export function csvColumns(fieldNames: string[]): string[] {
  return [...new Set([...LEADING, ...fieldNames, ...TRAILING])];
}

function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (Array.isArray(value)) return value.map(csvCell).join('|');
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

/** RFC 4180 CSV with a header row; arrays are joined with `|`. */
export function csvFormat(columns: string[]): FileFormat {
  return {
    header: () => stringifyCsv([columns], { record_delimiter: '\r\n' }),
    line: (item) => stringifyCsv([columns.map((c) => csvCell(item[c]))], { record_delimiter: '\r\n' }),
    parse: (text) => parseCsv(text, { columns: true, skip_empty_lines: true, relax_column_count: true }) as Item[],
    parseRecord: (record) => {
      let rows: string[][];
      try {
        rows = parseCsv(record, { skip_empty_lines: true, relax_column_count: true, relax_quotes: true }) as string[][];
      } catch {
        return undefined;
      }
      const row = rows[0];
      return row ? Object.fromEntries(columns.map((c, i) => [c, row[i] ?? ''])) : undefined;
    },
    quoted: true,
  };
}
