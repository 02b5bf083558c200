import { mkdir } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Item } from '@crawlfleet/core';
import { AppendFile, type SinkIO } from './append-file.js';
import { Batcher, type BatcherOptions } from './batcher.js';
import { FileLock } from './file-lock.js';
import type { FileFormat } from './formats.js';
import { identityDigest, type IdentityIndex, type IndexState } from './identity-index.js';
import { RecordSplitter } from './record-splitter.js';
import { SinkBusyError, itemIdentity, type ItemSink, type KeyFields } from './sink.js';

export type { SinkIO } from './append-file.js';

export interface FileSinkOptions {
  /** where the identities of what the file holds are kept (RedisIdentityIndex in the fleet) */
  index: IdentityIndex;
  batch?: BatcherOptions;
  /** bytes read at a time when the file is indexed on open */
  chunkBytes?: number;
  /** a lock file not renewed for this long is taken over (its owner's host went away or it hung) */
  staleLockMs?: number;
  /** how long a job waits before it tries again while another writer holds the file */
  busyWaitMs?: number;
  io?: SinkIO;
}

/**
 * An append-only file of items (JSONL or CSV) that stays exactly-once across crashes, resumes and
 * writers:
 * - one writer at a time: a lock file next to it (FileLock); a writer that cannot get it refuses
 *   items with SinkBusyError, which parks the jobs without spending an attempt;
 * - dedup by item identity in an index outside the process (Redis), so memory stays bounded
 *   whatever the file's size. The index records up to which byte it covers; on open only the part
 *   of the file after that is read, streamed (a crash after an append and before its record: those
 *   records are indexed from the file, which stays the truth);
 * - a torn last record (a crash or a full disk mid-append) is cut, on open and after a failed append
 *   before the next one; each append is fdatasync'd before any of its jobs is acknowledged.
 */
export class FileSink implements ItemSink {
  private readonly batcher: Batcher<Item>;
  private readonly lock: FileLock;
  private file: AppendFile | undefined;
  /** what the index is known to cover; below the file's end after a failed record, caught up before the next lookup */
  private indexedTo = 0;

  private constructor(
    private readonly path: string,
    private readonly format: FileFormat,
    private readonly keyFields: KeyFields,
    private readonly options: FileSinkOptions,
  ) {
    this.lock = new FileLock(path, options.staleLockMs ?? 20_000);
    this.batcher = new Batcher((items) => this.flush(items), options.batch ?? { maxItems: 500, maxWaitMs: 50 });
  }

  /**
   * Opens the file, taking its lock and bringing the index up to date when the lock is free. When
   * another writer holds it, the sink still opens; its writes wait (SinkBusyError) until it is free.
   */
  static async open(path: string, format: FileFormat, keyFields: KeyFields, options: FileSinkOptions): Promise<FileSink> {
    const absolute = resolve(path);
    await mkdir(dirname(absolute), { recursive: true });
    const sink = new FileSink(absolute, format, keyFields, options);
    await sink.takeFile().catch(async (err: unknown) => {
      if (!(err instanceof SinkBusyError)) {
        await sink.close().catch(() => undefined);
        throw err;
      }
    });
    return sink;
  }

  write(items: Item[]): Promise<void> {
    return this.batcher.add(items);
  }

  async close(): Promise<void> {
    await this.batcher.drain();
    await this.file?.close();
    this.file = undefined;
    await this.lock.release();
  }

  /** Holds the lock, taking it (and recovering the file) if this sink does not. */
  private async takeFile(): Promise<void> {
    if (this.file && (await this.lock.holds())) return;
    await this.file?.close().catch(() => undefined);
    this.file = undefined;
    if (!(await this.lock.tryAcquire())) {
      throw new SinkBusyError(`${this.path} is being written by ${await this.lock.describeOwner()} (lock ${this.lock.path})`, this.options.busyWaitMs ?? 2000);
    }
    try {
      this.file = await AppendFile.open(this.path, this.options.io);
      await this.recover();
    } catch (err) {
      await this.file?.close().catch(() => undefined);
      this.file = undefined;
      await this.lock.release();
      throw err;
    }
  }

  /**
   * Makes the index describe the file: keeps what it recorded if the bytes before its offset are
   * still those it saw, else starts over; indexes the records after that offset, streamed; cuts a
   * torn last record; writes the CSV header of a new file.
   */
  private async recover(): Promise<void> {
    const file = this.file!;
    const size = await file.size();
    const recorded = await this.options.index.state();
    let from = 0;
    if (recorded && recorded.path === this.path && recorded.offset <= size && (await file.hasTailAt(recorded.offset, recorded.tail))) from = recorded.offset;
    if (from === 0) await this.options.index.clear();
    await file.endAt(await this.indexRecords(from, size));
    if (file.end === 0 && this.format.header) await file.append(Buffer.from(this.format.header()));
    await this.options.index.record([], file.stateAt());
    this.indexedTo = file.end;
  }

  /**
   * Adds the identities of the complete records in [from, to) to the index, reading `chunkBytes`
   * at a time; returns where the last complete record ends (the rest is torn).
   */
  private async indexRecords(from: number, to: number): Promise<number> {
    const chunkBytes = this.options.chunkBytes ?? 1 << 20;
    const splitter = new RecordSplitter(this.format.quoted, from);
    let complete = from;
    let position = from;
    let digests: Buffer[] = [];
    while (position < to) {
      const chunk = await this.file!.readRange(position, Math.min(position + chunkBytes, to));
      const n = chunk.length;
      if (n === 0) break;
      for (const record of splitter.push(chunk)) {
        const isHeader = this.format.header !== undefined && record.start === 0;
        const item = isHeader ? undefined : this.format.parseRecord(record.text);
        if (item) digests.push(identityDigest(itemIdentity(item, this.keyFields)));
        complete = record.end;
      }
      position += n;
      if (digests.length >= 1000) {
        await this.options.index.record(digests);
        digests = [];
      }
    }
    await this.options.index.record(digests);
    return complete;
  }

  private async flush(items: Item[]): Promise<void> {
    await this.takeFile();
    const file = this.file!;
    if (file.torn) await file.cutBack();
    if (this.indexedTo < file.end) await this.catchUpIndex();
    const candidates = new Map<string, { item: Item; digest: Buffer }>();
    for (const item of items) {
      const digest = identityDigest(itemIdentity(item, this.keyFields));
      const key = digest.toString('base64');
      if (!candidates.has(key)) candidates.set(key, { item, digest });
    }
    const entries = [...candidates.values()];
    const digests = entries.map((e) => e.digest);
    let found = await this.options.index.lookup(digests);
    if (!this.indexDescribesFile(found.state)) {
      // the index changed under us (Redis lost its data, or someone reset the crawl): rebuild it from the file
      await this.recover();
      found = await this.options.index.lookup(digests);
    }
    const held = found.held;
    const fresh = entries.filter((_, i) => !held[i]);
    if (fresh.length === 0) return;
    await file.append(Buffer.from(fresh.map((e) => this.format.line(e.item)).join('')));
    await this.options.index.record(
      fresh.map((e) => e.digest),
      file.stateAt(),
    );
    this.indexedTo = file.end;
  }

  private indexDescribesFile(state: IndexState | undefined): boolean {
    return state !== undefined && state.path === this.path && state.offset === this.indexedTo;
  }

  /** After a failed record: the records between what the index covers and the end, from the file. */
  private async catchUpIndex(): Promise<void> {
    const file = this.file!;
    await this.indexRecords(this.indexedTo, file.end);
    await this.options.index.record([], file.stateAt());
    this.indexedTo = file.end;
  }
}
