import * as zlib from 'node:zlib';
import { NonRetryableError, RetryableError } from '@crawlfleet/core';

/** Node's zstd decoder, where this Node has one (24 does). */
const zstdDecompressSync = (zlib as { zstdDecompressSync?: (b: Buffer, o: { maxOutputLength: number }) => Buffer }).zstdDecompressSync;

/**
 * The codings a body may carry, outermost last (RFC 9110 8.4: listed in the order applied).
 * Unknown codings are left alone: the body is passed on as it came, as got does.
 */
export function contentCodings(header: string | string[] | undefined): string[] {
  const value = Array.isArray(header) ? header.join(',') : (header ?? '');
  return value
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
}

function decodeOne(body: Buffer, coding: string, maxBytes: number): Buffer | undefined {
  const limit = { maxOutputLength: maxBytes };
  switch (coding) {
    case 'gzip':
    case 'x-gzip':
      return zlib.gunzipSync(body, { ...limit, finishFlush: zlib.constants.Z_SYNC_FLUSH });
    case 'deflate':
      // "deflate" is meant to be zlib-wrapped, and some servers send it raw: the first byte tells.
      return body.length > 0 && (body[0]! & 0x0f) === 8 ? zlib.inflateSync(body, limit) : zlib.inflateRawSync(body, limit);
    case 'br':
      return zlib.brotliDecompressSync(body, limit);
    case 'zstd':
      return zstdDecompressSync ? zstdDecompressSync(body, limit) : undefined;
    default:
      return undefined;
  }
}

/**
 * A body as the page's bytes, from the bytes on the wire: the Content-Encoding undone, innermost
 * last, under the size cap. Used where the wire bytes are kept too (WARC output), so got's own
 * decompression is off. A body that does not decode is a broken response: another attempt may do.
 */
export function decodeContentEncoding(wire: Buffer, header: string | string[] | undefined, maxBytes: number, url: string): Buffer {
  // A 204, a 304 or a HEAD has no body to decode, whatever its Content-Encoding says (as got does).
  if (wire.length === 0) return wire;
  let body = wire;
  for (const coding of contentCodings(header).reverse()) {
    try {
      const decoded = decodeOne(body, coding, maxBytes);
      if (decoded === undefined) return body;
      body = decoded;
    } catch (err) {
      if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError) {
        throw new NonRetryableError('ERR_RESPONSE_TOO_LARGE', `response larger than ${maxBytes} bytes once decoded (${coding})`, { url }, { cause: err });
      }
      throw new RetryableError('ERR_BODY_DECODE', `the body does not decode as ${coding}: ${(err as Error).message}`, { url }, { cause: err });
    }
  }
  return body;
}
