import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { WARCRecord } from 'warcio';
import { WARCSerializer } from 'warcio/node';

/**
 * WARC/1.1 records of one fetched exchange, written with webrecorder's warcio.js. Digests are SHA-1
 * in base32, as Heritrix, python's warcio and pywb write them, so every reader of the format checks
 * and deduplicates them.
 */
export const WARC_VERSION = 'WARC/1.1';
const DIGEST = { algo: 'sha-1', prefix: 'sha1:', base32: true } as const;

/** What one exchange needs to become records: the heads and the body as on the wire. */
export interface Exchange {
  targetUri: string;
  /** ISO 8601, with milliseconds (WARC/1.1 allows them) */
  date: string;
  requestHead: string;
  responseHead: string;
  body: Buffer;
  ip?: string;
  outlinks?: string[];
}

/** An earlier capture with the same payload: the exchange becomes a revisit of it. */
export interface EarlierCapture {
  uri: string;
  date: string;
}

function base32(bytes: Buffer): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out.padEnd(Math.ceil(out.length / 8) * 8, '=');
}

/** The payload digest of a body as on the wire (WARC 1.1: the entity body, Content-Encoding kept). */
export function payloadDigest(body: Buffer): string {
  return DIGEST.prefix + base32(createHash('sha1').update(body).digest());
}

/**
 * A record whose HTTP block is written byte for byte as given: warcio.js would parse and re-serialise
 * the head (regrouping repeated headers), so its parsed head is dropped and the bytes are the block.
 * The serializer then digests the whole block; the payload digest is set here, over the body alone
 * (a revisit's is its original's).
 */
function verbatimHttpRecord(options: NonNullable<Parameters<typeof WARCRecord.create>[0]>, head: string, body: Buffer): WARCRecord {
  const given = (options.warcHeaders ?? {}) as Record<string, string>;
  const warcHeaders = given['WARC-Payload-Digest'] ? given : { ...given, 'WARC-Payload-Digest': payloadDigest(body) };
  const record = WARCRecord.create({ ...options, warcHeaders, warcVersion: WARC_VERSION }, [Buffer.from(head, 'latin1'), body]);
  record.httpHeaders = null;
  return record;
}

/**
 * The run of the crawl a record was archived in (crawlfleet's own WARC field; readers ignore fields
 * they do not know). Recovery tells a run's records by it, not by WARC-Date: the date is the
 * fetcher's clock, the run's start the seeder's, and the two machines' clocks may differ.
 */
export const WARC_RUN_FIELD = 'WARC-Crawlfleet-Run';

/**
 * The records of one exchange, in the order they are written: the response (or, when an earlier
 * capture had the same payload, a revisit of it), the request, and a metadata record with the
 * page's outlinks when the parser found any. The request and metadata name the response in
 * WARC-Concurrent-To. `run` (the crawl's run) goes into each record's WARC_RUN_FIELD.
 */
export function exchangeRecords(exchange: Exchange, digest: string, earlier: EarlierCapture | undefined, run?: string): WARCRecord[] {
  const common = { url: exchange.targetUri, date: exchange.date };
  const ofRun: Record<string, string> = run ? { [WARC_RUN_FIELD]: run } : {};
  // the response's (or revisit's) own fields: the server's address, and the run
  const ip: Record<string, string> = { ...(exchange.ip ? { 'WARC-IP-Address': exchange.ip } : {}), ...ofRun };
  const response = isNotModified(exchange)
    ? notModifiedRecord(exchange, ip)
    : earlier
      ? verbatimHttpRecord(
          { ...common, type: 'revisit', refersToUrl: earlier.uri, refersToDate: earlier.date, warcHeaders: { 'WARC-Payload-Digest': digest, ...ip } },
          exchange.responseHead,
          Buffer.alloc(0),
        )
      : verbatimHttpRecord({ ...common, type: 'response', warcHeaders: { 'WARC-Payload-Digest': digest, ...ip } }, exchange.responseHead, exchange.body);
  const responseId = response.warcHeaders.headers.get('WARC-Record-ID')!;
  const records = [response, verbatimHttpRecord({ ...common, type: 'request', warcHeaders: { 'WARC-Concurrent-To': responseId, ...ofRun } }, exchange.requestHead, Buffer.alloc(0))];
  if (exchange.outlinks && exchange.outlinks.length > 0) {
    const fields = exchange.outlinks.map((link) => `outlink: ${link}\r\n`).join('');
    records.push(WARCRecord.create({ ...common, type: 'metadata', warcVersion: WARC_VERSION, warcHeaders: { 'WARC-Concurrent-To': responseId, ...ofRun } }, [Buffer.from(fields)]));
  }
  return records;
}

/** A recrawl's 304 answer: its page is the one archived at an earlier visit. */
export function isNotModified(exchange: Pick<Exchange, 'responseHead'>): boolean {
  return /^HTTP\/\S+ 304\b/.test(exchange.responseHead);
}

/**
 * A 304 is a revisit of the server-not-modified profile (WARC 1.1, 6.7.3): its head as received,
 * referring to the same URI's earlier capture, which replay tools look up by URI and time.
 */
function notModifiedRecord(exchange: Exchange, fields: Record<string, string>): WARCRecord {
  const record = verbatimHttpRecord({ url: exchange.targetUri, date: exchange.date, type: 'revisit', warcHeaders: fields }, exchange.responseHead, Buffer.alloc(0));
  record.warcHeaders.headers.set('WARC-Profile', NOT_MODIFIED_PROFILE);
  record.warcHeaders.headers.set('WARC-Refers-To-Target-URI', exchange.targetUri);
  return record;
}
const NOT_MODIFIED_PROFILE = 'http://netpreserve.org/warc/1.1/revisit/server-not-modified';

/** The warcinfo record that opens each file. */
export function warcinfoRecord(filename: string, software: string, date = new Date().toISOString()): WARCRecord {
  return WARCRecord.createWARCInfo(
    { filename, warcVersion: WARC_VERSION, date },
    { software, format: 'WARC File Format 1.1', conformsTo: 'https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/' },
  );
}

/**
 * One record as a gzip member of its own (so a reader can seek to any record). warcio.js serialises
 * and digests it; Node's zlib compresses it, at the same level and size as warcio.js's
 * CompressionStream and in half the time (1.6 ms against 3.2 ms for a 90 KB page).
 */
export async function serializeRecord(record: WARCRecord): Promise<Buffer> {
  return gzipSync(await WARCSerializer.serialize(record, { gzip: false, digest: DIGEST }));
}
