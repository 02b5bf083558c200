import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { tailDigest, type IndexState } from './identity-index.js';

/** The sink's reads and writes at a position, replaceable to test what a disk does (short reads, a full disk). */
export interface SinkIO {
  read(handle: FileHandle, buffer: Buffer, position: number): Promise<number>;
  write(handle: FileHandle, buffer: Buffer, position: number): Promise<number>;
}

export const nodeIO: SinkIO = {
  read: async (handle, buffer, position) => (await handle.read(buffer, 0, buffer.length, position)).bytesRead,
  write: async (handle, buffer, position) => (await handle.write(buffer, 0, buffer.length, position)).bytesWritten,
};

/** Bytes before the recorded offset whose digest tells that the file is still the one indexed. */
export const TAIL_BYTES = 4096;

/**
 * A file written only at its end, one whole record after another: each append is fdatasync'd before
 * it counts, and one that fails part-way (a full disk) is cut back at once, or before the next append
 * if that fails too. `end` is where the last whole record ends; the state (path, end, a digest of
 * the bytes before it) is what an index records to know the file again.
 */
export class AppendFile {
  /** where the next append goes: the end of the last complete record */
  end = 0;
  /** the last bytes before `end` */
  private tail: Buffer = Buffer.alloc(0);
  /** a failed append may have left bytes after `end` that could not be cut yet */
  torn = false;

  private constructor(
    readonly path: string,
    readonly handle: FileHandle,
    private readonly io: SinkIO,
  ) {}

  static async open(path: string, io: SinkIO = nodeIO): Promise<AppendFile> {
    return new AppendFile(path, await open(path, constants.O_RDWR | constants.O_CREAT, 0o644), io);
  }

  async size(): Promise<number> {
    return (await this.handle.stat()).size;
  }

  /** Whether the bytes before `offset` are those an index saw (its state's tail digest). */
  async hasTailAt(offset: number, digest: string): Promise<boolean> {
    return tailDigest(await this.readRange(Math.max(0, offset - TAIL_BYTES), offset)) === digest;
  }

  /** Makes `complete` the end: whatever follows it (a torn record) is cut. */
  async endAt(complete: number): Promise<void> {
    if (complete < (await this.size())) {
      await this.handle.truncate(complete);
      await this.handle.datasync();
    }
    this.end = complete;
    this.tail = await this.readRange(Math.max(0, complete - TAIL_BYTES), complete);
    this.torn = false;
  }

  async append(bytes: Buffer): Promise<void> {
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

  async cutBack(): Promise<void> {
    await this.handle.truncate(this.end);
    await this.handle.datasync();
    this.torn = false;
  }

  stateAt(): IndexState {
    return { path: this.path, offset: this.end, tail: tailDigest(this.tail) };
  }

  async readRange(from: number, to: number): Promise<Buffer> {
    const buffer = Buffer.alloc(to - from);
    for (let got = 0; got < buffer.length; ) {
      const n = await this.io.read(this.handle, buffer.subarray(got), from + got);
      if (n === 0) return buffer.subarray(0, got);
      got += n;
    }
    return buffer;
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}
