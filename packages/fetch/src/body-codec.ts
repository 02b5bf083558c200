import { brotliCompressSync, brotliDecompressSync, constants, gunzipSync } from 'node:zlib';

/** Marks a brotli body; a body without it is gzip, as fetchers before it wrote them. */
const BROTLI_TAG = 'br:';

/**
 * Page bodies cross Redis brotli-compressed at quality 1, in base64 (job data is JSON). On the
 * python3-doc and top-site pages it encodes 4-6x faster than gzip level 6 did (0.3 ms vs 1.5 ms a
 * page) and decodes a little faster, for about 10% more bytes.
 */
export function encodeBody(body: Buffer): string {
  const compressed = brotliCompressSync(body, {
    params: { [constants.BROTLI_PARAM_QUALITY]: 1, [constants.BROTLI_PARAM_SIZE_HINT]: body.length },
  });
  return BROTLI_TAG + compressed.toString('base64');
}

/** Decodes a body of either format, so parse jobs written by an older fetcher still decode. */
export function decodeBody(encoded: string, maxBytes = 64 * 1024 * 1024): Buffer {
  if (encoded.startsWith(BROTLI_TAG)) return brotliDecompressSync(Buffer.from(encoded.slice(BROTLI_TAG.length), 'base64'), { maxOutputLength: maxBytes });
  return gunzipSync(Buffer.from(encoded, 'base64'), { maxOutputLength: maxBytes });
}
