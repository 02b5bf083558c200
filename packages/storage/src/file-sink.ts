import { mkdir, open, readFile, stat, truncate, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Item } from '@crawlfleet/core';
import { Batcher, type BatcherOptions } from './batcher.js';
import { itemIdentity, type ItemSink, type KeyFields } from './sink.js';
import type { FileFormat } from './formats.js';

/**
 * An append-only file of items (JSONL or CSV) that stays exactly-once across crashes and resumes:
 * - on open, a torn last line (a crash mid-write) is cut off, and the identities already in the file
 *   are loaded, so an item written before a crash is not written again when its job re-runs;
 * - each flush appends one batch and fdatasyncs before any of its jobs is acknowledged.
 * One writer process owns a file; use MongoDB to run many writers.
 */
export class FileSink implements ItemSink {
  private readonly written = new Set<string>();
  private readonly batcher: Batcher<Item>;
  private handle: FileHandle | undefined;

  private constructor(private readonly path: string, private readonly format: FileFormat, private readonly keyFields: KeyFields, batch: BatcherOptions) {
    this.batcher = new Batcher((items) => this.flush(items), batch);
  }

  static async open(path: string, format: FileFormat, keyFields: KeyFields, batch: BatcherOptions = { maxItems: 500, maxWaitMs: 50 }): Promise<FileSink> {
    const sink = new FileSink(path, format, keyFields, batch);
    await sink.recover();
    return sink;
  }

  write(items: Item[]): Promise<void> {
    return this.batcher.add(items);
  }

  async close(): Promise<void> {
    await this.batcher.drain();
    await this.handle?.close();
    this.handle = undefined;
  }

  private async recover(): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    const size = await stat(this.path).then((s) => s.size, () => 0);
    if (size > 0) {
      const text = await readFile(this.path, 'utf8');
      const complete = text.lastIndexOf('\n') + 1;
      if (complete < text.length) await truncate(this.path, Buffer.byteLength(text.slice(0, complete)));
      for (const item of this.format.parse(text.slice(0, complete))) this.written.add(itemIdentity(item, this.keyFields));
    }
    this.handle = await open(this.path, 'a');
    if (size === 0 && this.format.header) await this.append(this.format.header());
  }

  private async flush(items: Item[]): Promise<void> {
    const fresh: Item[] = [];
    const identities: string[] = [];
    for (const item of items) {
      const id = itemIdentity(item, this.keyFields);
      if (this.written.has(id) || identities.includes(id)) continue;
      fresh.push(item);
      identities.push(id);
    }
    if (fresh.length === 0) return;
    await this.append(fresh.map((i) => this.format.line(i)).join(''));
    for (const id of identities) this.written.add(id);
  }

  private async append(text: string): Promise<void> {
    if (!this.handle) throw new Error(`${this.path} is closed`);
    await this.handle.write(text);
    await this.handle.datasync();
  }
}
