import { constants } from 'node:fs';
import { mkdir, open, type FileHandle } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Item } from '@crawlfleet/core';
import { Batcher, type BatcherOptions } from './batcher.js';
import { FileLock } from './file-lock.js';
import type { FileFormat } from './formats.js';
import { identityDigest, tailDigest, type IdentityIndex, type IndexState } from './identity-index.js';
import { RecordSplitter } from './record-splitter.js';
import { SinkBusyError, itemIdentity, type ItemSink, type KeyFields } from './sink.js';

/** The sink's reads and writes at a position, replaceable to test what a disk does (short reads, a full disk). */
export interface SinkIO {
  read(handle: FileHandle, buffer: Buffer, position: number): Promise<number>;
  write(handle: FileHandle, buffer: Buffer, position: number): Promise<number>;
}

const nodeIO: SinkIO = {
  read: async (handle, buffer, position) => (await handle.read(buffer, 0, buffer.length, position)).bytesRead,
  write: async (handle, buffer, position) => (await handle.write(buffer, 0, buffer.length, position)).bytesWritten,
};

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

/** Bytes before the recorded offset whose digest tells that the file is still the one indexed. */
const TAIL_BYTES = 4096;

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
  private readonly io: SinkIO;
  private handle: FileHandle | undefined;
  /** where the next append goes: the end of the last complete record */
  private end = 0;
  /** what the index is known to cover; below `end` after a failed record, caught up before the next lookup */
  private indexedTo = 0;
  /** the last bytes before `end` */
  private tail: Buffer = Buffer.alloc(0);
  /** a failed append may have left bytes after `end` that could not be cut yet */
  private torn = false;

  private constructor(
    private readonly path: string,
    private readonly format: FileFormat,
    private readonly keyFields: KeyFields,
    private readonly options: FileSinkOptions,
  ) {
    this.lock = new FileLock(path, options.staleLockMs ?? 20_000);
    this.io = options.io ?? nodeIO;
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
    await this.handle?.close();
    this.handle = undefined;
    await this.lock.release();
  }

  /** Holds the lock, taking it (and recovering the file) if this sink does not. */
  private async takeFile(): Promise<void> {
    if (this.handle && (await this.lock.holds())) return;
    await this.handle?.close().catch(() => undefined);
    this.handle = undefined;
    if (!(await this.lock.tryAcquire())) {
      throw new SinkBusyError(`${this.path} is being written by ${await this.lock.describeOwner()} (lock ${this.lock.path})`, this.options.busyWaitMs ?? 2000);
    }
    try {
      this.handle = await open(this.path, constants.O_RDWR | constants.O_CREAT, 0o644);
      await this.recover();
    } catch (err) {
      await this.handle?.close().catch(() => undefined);
      this.handle = undefined;
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
    const handle = this.handle!;
    const size = (await handle.stat()).size;
    const recorded = await this.options.index.state();
    let from = 0;
    if (recorded && recorded.path === this.path && recorded.offset <= size) {
      const before = await this.readRange(Math.max(0, recorded.offset - TAIL_BYTES), recorded.offset);
      if (tailDigest(before) === recorded.tail) from = recorded.offset;
    }
    if (from === 0) await this.options.index.clear();
    const complete = await this.indexRecords(from, size);
    if (complete < size) {
      await handle.truncate(complete);
      await handle.datasync();
    }
    this.end = complete;
    this.tail = await this.readRange(Math.max(0, complete - TAIL_BYTES), complete);
    this.torn = false;
    if (complete === 0 && this.format.header) await this.append(Buffer.from(this.format.header()));
    await this.options.index.record([], this.stateAt());
    this.indexedTo = this.end;
  }

  /**
   * Adds the identities of the complete records in [from, to) to the index, reading `chunkBytes`
   * at a time; returns where the last complete record ends (the rest is torn).
   */
  private async indexRecords(from: number, to: number): Promise<number> {
    const chunk = Buffer.alloc(this.options.chunkBytes ?? 1 << 20);
    const splitter = new RecordSplitter(this.format.quoted, from);
    let complete = from;
    let position = from;
    let digests: Buffer[] = [];
    while (position < to) {
      const n = await this.io.read(this.handle!, chunk.subarray(0, Math.min(chunk.length, to - position)), position);
      if (n === 0) break;
      for (const record of splitter.push(chunk.subarray(0, n))) {
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
    if (this.torn) await this.cutBack();
    if (this.indexedTo < this.end) await this.catchUpIndex();
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
    await this.append(Buffer.from(fresh.map((e) => this.format.line(e.item)).join('')));
    await this.options.index.record(
      fresh.map((e) => e.digest),
      this.stateAt(),
    );
    this.indexedTo = this.end;
  }

  private indexDescribesFile(state: IndexState | undefined): boolean {
    return state !== undefined && state.path === this.path && state.offset === this.indexedTo;
  }

  /** After a failed record: the records between what the index covers and the end, from the file. */
  private async catchUpIndex(): Promise<void> {
    await this.indexRecords(this.indexedTo, this.end);
    await this.options.index.record([], this.stateAt());
    this.indexedTo = this.end;
  }

  /**
   * Appends at the end of the last complete record and fdatasyncs. If the write fails part-way (a
   * full disk), the file is cut back to that end at once, or before the next append if that fails too.
   */
  private async append(bytes: Buffer): Promise<void> {
    if (!this.handle) throw new Error(`${this.path} is closed`);
    try {
      for (let written = 0; written < bytes.length; ) {
        written += await this.io.write(this.handle, bytes.subarray(written), this.end + written);
      }
      await this.handle.datasync();
    } catch (err) {
      this.torn = true;
      await this.cutBack().catch(() => undefined);
      throw err;
    }
    this.end += bytes.length;
    this.tail = bytes.length >= TAIL_BYTES ? Buffer.from(bytes.subarray(bytes.length - TAIL_BYTES)) : Buffer.concat([this.tail, bytes]).subarray(-TAIL_BYTES);
  }

  private async cutBack(): Promise<void> {
    await this.handle!.truncate(this.end);
    await this.handle!.datasync();
    this.torn = false;
  }

  private stateAt(): IndexState {
    return { path: this.path, offset: this.end, tail: tailDigest(this.tail) };
  }

  private async readRange(from: number, to: number): Promise<Buffer> {
    const buffer = Buffer.alloc(to - from);
    for (let got = 0; got < buffer.length; ) {
      const n = await this.io.read(this.handle!, buffer.subarray(got), from + got);
      if (n === 0) return buffer.subarray(0, got);
      got += n;
    }
    return buffer;
  }
}
