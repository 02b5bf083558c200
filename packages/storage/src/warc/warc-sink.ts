import { access, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger, WarcOutput } from '@crawlfleet/core';
import { AppendFile, type SinkIO } from '../append-file.js';
import { Batcher, type BatcherOptions } from '../batcher.js';
import { FileLock } from '../file-lock.js';
import { identityDigest, type IdentityIndex, type IndexState } from '../identity-index.js';
import { SinkBusyError } from '../sink.js';
import { type EarlierCapture, type Exchange, exchangeRecords, isNotModified, payloadDigest, serializeRecord, warcinfoRecord } from './records.js';
import { type ScannedRecord, scanWarc, writeCdxj } from './scan.js';

/** Payload digests of the captures archived so far, for revisit records (Keys.warcIndex's `digests`). */
export interface CaptureDigests {
  earlier(digests: string[]): Promise<(EarlierCapture | undefined)[]>;
  /** the first capture of each digest wins */
  remember(captures: { digest: string; capture: EarlierCapture }[]): Promise<void>;
  clear(): Promise<void>;
}

export interface WarcSinkOptions {
  /**
   * this run of the crawl (its registration time, ISO 8601): a URL is archived once per run, and a
   * recrawl's run archives it again (a revisit when its payload is one archived before)
   */
  run?: string;
  /** the target URIs archived, and the state of the file being written (RedisIdentityIndex in the fleet) */
  index: IdentityIndex;
  digests: CaptureDigests;
  /** the warcinfo record's `software` */
  software: string;
  batch?: BatcherOptions;
  staleLockMs?: number;
  busyWaitMs?: number;
  io?: SinkIO;
  log?: Logger;
}

/**
 * Pure: whether a record found in a file was archived in `run`: by the run it names
 * (WARC_RUN_FIELD), never by comparing clocks (its WARC-Date is the fetcher's clock, the run's start
 * the seeder's). Only a record of an older version, which names none, is dated from the run's start.
 */
export function isOfRun(record: Pick<ScannedRecord, 'run' | 'date'>, run: string): boolean {
  if (record.run !== undefined) return record.run === run;
  return record.date !== undefined && Date.parse(record.date) >= Date.parse(run);
}

/** A record's identity in the index: one response (or revisit) per target URI and run. */
export const warcIdentity = (uri: string, run = '') => identityDigest(`warc\n${run}\n${uri}`);

const ARCHIVED = new Set(['response', 'revisit']);

/**
 * A crawl's WARC output: `<dir>/<crawlId>-00001.warc.gz`, `-00002`, ..., each opened by a warcinfo
 * record, every record a gzip member of its own, the next file begun once one reaches the rollover
 * size, and a CDXJ index beside each file once it is closed. Exactly once, as the item files are
 * (FileSink): one writer at a time holds the directory's lock; the target URIs archived are kept in
 * Redis with the state of the file being written, and the file stays the truth: on open, what was
 * appended after the recorded state is indexed from the file, and a torn last record is cut.
 */
export class WarcSink {
  private readonly batcher: Batcher<Exchange>;
  private readonly lock: FileLock;
  private file: AppendFile | undefined;
  private sequence = 0;
  /** where the file's first record (warcinfo) ends: a file holding only it is never rolled over */
  private headerEnd = 0;
  private indexedTo = 0;

  private constructor(
    private readonly output: WarcOutput,
    private readonly crawlId: string,
    private readonly options: WarcSinkOptions,
  ) {
    this.lock = new FileLock(join(output.dir, `${crawlId}.warc`), options.staleLockMs ?? 20_000);
    this.batcher = new Batcher((exchanges) => this.flush(exchanges), options.batch ?? { maxItems: 200, maxWaitMs: 50 });
  }

  static async open(output: WarcOutput, crawlId: string, options: WarcSinkOptions): Promise<WarcSink> {
    await mkdir(output.dir, { recursive: true });
    const sink = new WarcSink(output, crawlId, options);
    await sink.takeFiles().catch(async (err: unknown) => {
      if (!(err instanceof SinkBusyError)) {
        await sink.close().catch(() => undefined);
        throw err;
      }
    });
    return sink;
  }

  /** Archives the exchanges; settles once their records are on disk and indexed. */
  write(exchanges: Exchange | Exchange[]): Promise<void> {
    return this.batcher.add(Array.isArray(exchanges) ? exchanges : [exchanges]);
  }

  /** The file being written (for status and tests). */
  get currentPath(): string | undefined {
    return this.file?.path;
  }

  /**
   * Drains, writes the CDXJ of the file being written, and lets the directory go. A CDXJ that cannot
   * be written (a full disk) is logged, not thrown: the next open or rollover writes it.
   */
  async close(): Promise<void> {
    try {
      await this.batcher.drain();
      if (this.file && (await this.lock.holds())) await writeCdxj(this.file.path, this.file.end);
    } catch (err) {
      this.options.log?.warn({ dir: this.output.dir, err: (err as Error).message }, 'WARC output: could not write the CDXJ index on close');
    } finally {
      await this.dropFile();
      await this.lock.release().catch(() => undefined);
    }
  }

  private fileName(sequence: number): string {
    return join(this.output.dir, `${this.crawlId}-${String(sequence).padStart(5, '0')}.warc.gz`);
  }

  /** This crawl's files in the directory, by sequence number. */
  private async sequences(): Promise<number[]> {
    const pattern = new RegExp(`^${this.crawlId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-(\\d{5,})\\.warc\\.gz$`);
    return (await readdir(this.output.dir))
      .map((name) => pattern.exec(name)?.[1])
      .filter((n): n is string => n !== undefined)
      .map(Number)
      .sort((a, b) => a - b);
  }

  private async takeFiles(): Promise<void> {
    if (this.file && (await this.lock.holds())) return;
    await this.dropFile();
    if (!(await this.lock.tryAcquire())) {
      throw new SinkBusyError(`${this.output.dir} is being written by ${await this.lock.describeOwner()} (lock ${this.lock.path})`, this.options.busyWaitMs ?? 2000);
    }
    try {
      await this.recover();
    } catch (err) {
      await this.dropFile();
      await this.lock.release();
      throw err;
    }
  }

  private async dropFile(): Promise<void> {
    await this.file?.close().catch(() => undefined);
    this.file = undefined;
  }

  /**
   * Makes the index describe the files. The last file is the one being written: it is indexed from
   * the recorded offset if its bytes before it are those recorded, or whole if the state is of the
   * file before it (a rollover whose first record was not recorded yet). Any other state (none, a
   * reset, a file replaced) rebuilds the index from every file. A closed file without its CDXJ (a
   * crash just after its rollover) gets it.
   */
  private async recover(): Promise<void> {
    await this.dropFile();
    const sequences = await this.sequences();
    this.sequence = sequences.at(-1) ?? 1;
    const path = this.fileName(this.sequence);
    const file = await AppendFile.open(path, this.options.io);
    this.file = file;
    const size = await file.size();
    const recorded = await this.options.index.state();
    const earlierFiles = sequences.slice(0, -1).map((n) => this.fileName(n));
    let from: number;
    if (recorded?.path === path && recorded.offset <= size && (await file.hasTailAt(recorded.offset, recorded.tail))) from = recorded.offset;
    else if (recorded && recorded.path === earlierFiles.at(-1) && (await this.describes(recorded))) {
      // A rollover whose new file was not recorded yet (or whose record Redis lost, with the last
      // records of the file before): the file before is indexed from the state on, this one whole.
      await this.indexScanned((await scanWarc(recorded.path, recorded.offset, Number.MAX_SAFE_INTEGER)).records);
      from = 0;
    } else {
      from = 0;
      await this.options.index.clear();
      await this.options.digests.clear();
      for (const earlier of earlierFiles) await this.indexScanned((await scanWarc(earlier, 0, Number.MAX_SAFE_INTEGER)).records);
    }
    const scanned = await scanWarc(path, from, size);
    await this.indexScanned(scanned.records);
    await file.endAt(scanned.complete);
    if (file.end === 0) await file.append(await serializeRecord(warcinfoRecord(path.split('/').at(-1)!, this.options.software)));
    this.headerEnd = from === 0 ? (scanned.records[0]?.length ?? file.end) : ((await scanWarc(path, 0, Math.min(file.end, 1 << 16))).records[0]?.length ?? 0);
    await this.options.index.record([], file.stateAt());
    this.indexedTo = file.end;
    for (const earlier of earlierFiles) {
      if (
        !(await access(`${earlier}.cdxj`)
          .then(() => true)
          .catch(() => false))
      )
        await writeCdxj(earlier, Number.MAX_SAFE_INTEGER);
    }
  }

  /** Whether a closed file's bytes before the state's offset are those the state recorded. */
  private async describes(state: IndexState): Promise<boolean> {
    const file = await AppendFile.open(state.path, this.options.io);
    try {
      return state.offset <= (await file.size()) && (await file.hasTailAt(state.offset, state.tail));
    } finally {
      await file.close();
    }
  }

  /** The records found in a file: their payloads for revisits, and their URIs when of this run. */
  private async indexScanned(records: ScannedRecord[]): Promise<void> {
    const archived = records.filter((r) => ARCHIVED.has(r.type) && r.uri);
    await this.options.digests.remember(archived.filter((r) => r.type === 'response' && r.payloadDigest && r.date).map((r) => ({ digest: r.payloadDigest!, capture: { uri: r.uri!, date: r.date! } })));
    const run = this.options.run;
    const ofThisRun = run ? archived.filter((r) => isOfRun(r, run)) : archived;
    await this.options.index.record(ofThisRun.map((r) => this.identity(r.uri!)));
  }

  private identity(uri: string): Buffer {
    return warcIdentity(uri, this.options.run);
  }

  private indexDescribesFile(state: IndexState | undefined): boolean {
    return state !== undefined && state.path === this.file?.path && state.offset === this.indexedTo;
  }

  private async flush(exchanges: Exchange[]): Promise<void> {
    await this.takeFiles();
    let file = this.file!;
    if (file.torn) await file.cutBack();
    if (this.indexedTo < file.end) await this.catchUpIndex();
    const byUri = new Map<string, Exchange>();
    for (const exchange of exchanges) if (!byUri.has(exchange.targetUri)) byUri.set(exchange.targetUri, exchange);
    const entries = [...byUri.values()];
    const identities = entries.map((e) => this.identity(e.targetUri));
    let found = await this.options.index.lookup(identities);
    if (!this.indexDescribesFile(found.state)) {
      // the index changed under us (Redis lost its data, or the crawl was reset): rebuild it from the files
      await this.recover();
      file = this.file!;
      found = await this.options.index.lookup(identities);
    }
    const fresh = entries.filter((_, i) => !found.held[i]);
    if (fresh.length === 0) return;
    const digests = fresh.map((e) => payloadDigest(e.body));
    const known = await this.options.digests.earlier(digests);
    const firsts = new Map<string, EarlierCapture>();
    const members: Buffer[] = [];
    for (const [i, exchange] of fresh.entries()) {
      const digest = digests[i]!;
      // a 304 has no payload of its own: it refers to its URI's earlier capture
      const notModified = isNotModified(exchange);
      const earlier = notModified ? undefined : (known[i] ?? firsts.get(digest));
      if (!earlier && !notModified) firsts.set(digest, { uri: exchange.targetUri, date: exchange.date });
      for (const record of exchangeRecords(exchange, digest, earlier, this.options.run)) members.push(await serializeRecord(record));
    }
    const bytes = Buffer.concat(members);
    if (file.end > this.headerEnd && file.end + bytes.length > this.output.rolloverBytes) file = await this.rollOver();
    await file.append(bytes);
    await this.options.digests.remember([...firsts].map(([digest, capture]) => ({ digest, capture })));
    await this.options.index.record(
      fresh.map((e) => this.identity(e.targetUri)),
      file.stateAt(),
    );
    this.indexedTo = file.end;
  }

  /** Closes the file with its CDXJ and begins the next with its warcinfo record. */
  private async rollOver(): Promise<AppendFile> {
    const old = this.file!;
    await writeCdxj(old.path, old.end);
    await old.close();
    this.file = undefined;
    this.sequence += 1;
    const path = this.fileName(this.sequence);
    const file = await AppendFile.open(path, this.options.io);
    this.file = file;
    await file.endAt(0);
    await file.append(await serializeRecord(warcinfoRecord(path.split('/').at(-1)!, this.options.software)));
    this.headerEnd = file.end;
    await this.options.index.record([], file.stateAt());
    this.indexedTo = file.end;
    return file;
  }

  /** After a failed record: the records between what the index covers and the end, from the file. */
  private async catchUpIndex(): Promise<void> {
    const file = this.file!;
    await this.indexScanned((await scanWarc(file.path, this.indexedTo, file.end)).records);
    await this.options.index.record([], file.stateAt());
    this.indexedTo = file.end;
  }
}
