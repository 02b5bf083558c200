const NEWLINE = 0x0a;
const QUOTE = 0x22;

/** One complete record of a file: its text (line ending included), where it starts, and the offset just after it. */
export interface FileRecord {
  text: string;
  start: number;
  end: number;
}

/**
 * Splits a file read chunk by chunk into complete records, holding only the unfinished record
 * between chunks, so a file of any size is read in bounded memory. A record ends at a newline; with
 * `quoted` (CSV) only at a newline outside double quotes (an escaped quote `""` toggles twice). Both
 * bytes are ASCII and never occur inside a multi-byte UTF-8 character, so splitting bytes is safe.
 * Whatever is left when the file ends (`pendingBytes`) is a torn record: a write cut short.
 */
export class RecordSplitter {
  private carry: Buffer[] = [];
  private carryBytes = 0;
  private inQuotes = false;

  /** @param offset where in the file the first chunk starts (a record boundary) */
  constructor(
    private readonly quoted: boolean,
    private offset: number,
  ) {}

  /** The records this chunk completes, in order. */
  push(chunk: Buffer): FileRecord[] {
    const records: FileRecord[] = [];
    let start = 0;
    let i = 0;
    while (i < chunk.length) {
      const end = this.quoted ? this.nextEndQuoted(chunk, i) : chunk.indexOf(NEWLINE, i);
      if (end < 0) break;
      const piece = chunk.subarray(start, end + 1);
      const bytes = this.carryBytes > 0 ? Buffer.concat([...this.carry, piece]) : piece;
      records.push({ text: bytes.toString('utf8'), start: this.offset, end: this.offset + bytes.length });
      this.offset += bytes.length;
      this.carry = [];
      this.carryBytes = 0;
      start = i = end + 1;
    }
    if (start < chunk.length) {
      // a copy: the caller may reuse its read buffer
      this.carry.push(Buffer.from(chunk.subarray(start)));
      this.carryBytes += chunk.length - start;
    }
    return records;
  }

  /** bytes of an unfinished record seen so far */
  get pendingBytes(): number {
    return this.carryBytes;
  }

  private nextEndQuoted(chunk: Buffer, from: number): number {
    for (let i = from; i < chunk.length; i++) {
      const byte = chunk[i];
      if (byte === QUOTE) this.inQuotes = !this.inQuotes;
      else if (byte === NEWLINE && !this.inQuotes) return i;
    }
    return -1;
  }
}
