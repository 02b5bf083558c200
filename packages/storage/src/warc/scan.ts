import { createReadStream } from 'node:fs';
import { open, writeFile, rename } from 'node:fs/promises';
import { basename } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { CDXIndexer, WARCParser } from 'warcio';
import { WARC_RUN_FIELD } from './records.js';
import { surtKey } from './surt.js';

/** What recovery needs of a record found in a file. */
export interface ScannedRecord {
  type: string;
  uri: string | undefined;
  date: string | undefined;
  payloadDigest: string | undefined;
  /** the run of the crawl it was archived in (WARC_RUN_FIELD); undefined in records of older versions */
  run: string | undefined;
  offset: number;
  length: number;
}

/** Whether the bytes are one whole gzip member (a torn one fails its length and CRC check). */
function isWholeMember(bytes: Buffer): boolean {
  try {
    gunzipSync(bytes);
    return true;
  } catch {
    return false;
  }
}

async function readRange(path: string, from: number, to: number): Promise<Buffer> {
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.alloc(to - from);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, from);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/**
 * The records of a WARC file in [from, to), each a gzip member, and where the last whole one ends:
 * the bytes after that (a record torn by a crash mid-append) are not part of the file.
 */
export async function scanWarc(path: string, from: number, to: number): Promise<{ records: ScannedRecord[]; complete: number }> {
  const records: ScannedRecord[] = [];
  if (to <= from) return { records, complete: from };
  const parser = new WARCParser(createReadStream(path, { start: from, end: to - 1 }));
  try {
    for await (const record of parser) {
      const offset = from + parser.offset;
      await record.readFully(false);
      records.push({
        type: record.warcType ?? '',
        uri: record.warcTargetURI ?? undefined,
        date: record.warcDate ?? undefined,
        payloadDigest: record.warcPayloadDigest ?? undefined,
        run: record.warcHeader(WARC_RUN_FIELD) ?? undefined,
        offset,
        length: parser.recordLength,
      });
    }
  } catch (err) {
    // A torn member ends the parse, and what was read before it stands; a failing disk is no
    // torn record, and must not cut what follows.
    if (typeof (err as { code?: unknown }).code === 'string' && /^E[A-Z]+$/.test((err as { code: string }).code)) throw err;
  }
  // The parser reads a torn last member as far as it goes: only a whole gzip member counts.
  const last = records.at(-1);
  if (last && (last.offset + last.length > to || !isWholeMember(await readRange(path, last.offset, last.offset + last.length)))) records.pop();
  const end = records.at(-1);
  return { records, complete: end ? end.offset + end.length : from };
}

/**
 * Writes `<file>.cdxj` beside a WARC file: warcio.js's CDXJ indexer (the lines pywb reads) keyed by
 * python surt's key (surtKey), sorted by key and time as pywb needs them (it finds nothing in an
 * unsorted index). Written to a temporary name, then renamed, so a reader never sees half an index.
 */
export async function writeCdxj(path: string, upTo: number): Promise<string> {
  const indexer = new CDXIndexer({ format: 'cdxj' });
  const lines: string[] = [];
  if (upTo > 0) {
    const parser = new WARCParser(createReadStream(path, { start: 0, end: upTo - 1 }));
    for await (const entry of indexer.iterRecords(parser, basename(path))) {
      // the key pywb looks the URL up by (warcio.js's own differs for about a third of real URLs)
      entry.urlkey = surtKey(entry.url);
      lines.push(indexer.serializeCDXJ(entry));
    }
  }
  lines.sort();
  const target = `${path}.cdxj`;
  await writeFile(`${target}.tmp`, lines.join(''));
  await rename(`${target}.tmp`, target);
  return target;
}
