import { parse as parseCsv } from 'csv-parse/sync';
import { stringify as stringifyCsv } from 'csv-stringify/sync';
import type { Item } from '@crawlfleet/core';

/** How items become lines of a file, and back (to resume). */
export interface FileFormat {
  header?: () => string;
  line: (item: Item) => string;
  parse: (text: string) => Item[];
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
  };
}
