import { gunzipSync, gzipSync } from 'node:zlib';

/** Page bodies cross Redis gzip-compressed (level 6: most of the gain, a fraction of the time of 9). */
export function encodeBody(body: Buffer): string {
  return gzipSync(body, { level: 6 }).toString('base64');
}

export function decodeBody(encoded: string, maxBytes = 64 * 1024 * 1024): Buffer {
  return gunzipSync(Buffer.from(encoded, 'base64'), { maxOutputLength: maxBytes });
}
