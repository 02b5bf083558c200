import { isUtf8 } from 'node:buffer';
import { ResultType, Sniffer } from 'encoding-sniffer/sniffer';
import iconv from 'iconv-lite';
import { isJsonContentType } from '@crawlfleet/core';

/** Where a page's encoding came from, in the order the WHATWG sniffing algorithm tries them. */
export type EncodingSource = 'bom' | 'header' | 'meta' | 'late-meta' | 'utf8' | 'default';

export interface SniffedEncoding {
  /** a WHATWG encoding name, for example `UTF-8`, `GBK`, `Shift_JIS`, `windows-1251` */
  encoding: string;
  source: EncodingSource;
}

/** The prescan reads this much, as browsers do. */
const PRESCAN_BYTES = 1024;
/**
 * A `<meta charset>` past the prescan still counts: a browser that meets one while parsing "changes
 * the encoding" and parses again. Looking this far covers any real `<head>`.
 */
const LATE_META_BYTES = 64 * 1024;
/** Undeclared pages that are not valid UTF-8: the web's legacy default, as in browsers. */
const LEGACY_DEFAULT = 'windows-1252';

const SOURCE_BY_RESULT: Partial<Record<ResultType, EncodingSource>> = {
  [ResultType.BOM]: 'bom',
  [ResultType.PASSED]: 'header',
  [ResultType.META_TAG]: 'meta',
  [ResultType.XML_PREFIX]: 'bom',
  [ResultType.XML_ENCODING]: 'meta',
};

/** Pure: the `charset` parameter of a Content-Type header, if any. */
export function charsetOf(contentType: string | undefined): string | undefined {
  const match = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/i.exec(contentType ?? '');
  const label = (match?.[1] ?? match?.[2] ?? '').trim();
  return label === '' ? undefined : label;
}

function sniff(body: Buffer, maxBytes: number, transportLabel?: string): Sniffer {
  const sniffer = new Sniffer({ maxBytes, ...(transportLabel ? { transportLayerEncodingLabel: transportLabel } : {}) });
  sniffer.write(body.subarray(0, maxBytes));
  return sniffer;
}

/**
 * Pure: the encoding a browser would decode this page with (the WHATWG sniffing order): a byte-order
 * mark, then the Content-Type charset, then a `<meta charset>` or `http-equiv` in the first 1024
 * bytes. A label the Encoding Standard does not know is skipped, as browsers skip it. With none of
 * those, a `<meta>` further into the page still counts (a browser re-parses when it meets one), and
 * an undeclared page is UTF-8 when its bytes are valid UTF-8 (what Chrome's detector and Scrapy
 * conclude), else windows-1252.
 */
export function sniffEncoding(body: Buffer, contentType: string | undefined): SniffedEncoding {
  const first = sniff(body, PRESCAN_BYTES, charsetOf(contentType));
  const source = SOURCE_BY_RESULT[first.resultType];
  if (source) return { encoding: first.encoding, source };
  if (body.length > PRESCAN_BYTES) {
    const late = sniff(body, LATE_META_BYTES);
    if (late.resultType === ResultType.META_TAG) return { encoding: late.encoding, source: 'late-meta' };
  }
  return isUtf8(body) ? { encoding: 'UTF-8', source: 'utf8' } : { encoding: LEGACY_DEFAULT, source: 'default' };
}

/** Decodes bytes in a WHATWG encoding (iconv-lite, as cheerio does); a byte-order mark is dropped. */
export function decodeWith(body: Buffer, encoding: string): string {
  if (encoding === 'UTF-8') return new TextDecoder('utf-8').decode(body);
  return iconv.decode(body, iconv.encodingExists(encoding) ? encoding : LEGACY_DEFAULT);
}

/** Pure: a page's text, decoded as a browser decodes it. */
export function decodeHtml(body: Buffer, contentType: string | undefined): string {
  return decodeWith(body, sniffEncoding(body, contentType).encoding);
}

/**
 * Pure: a JSON response's text. A byte-order mark wins, then the Content-Type charset (a label the
 * Encoding Standard knows), else UTF-8, as RFC 8259 has it: no `<meta>` prescan and no legacy default.
 */
export function decodeJson(body: Buffer, contentType: string | undefined): string {
  const label = charsetOf(contentType);
  const sniffer = new Sniffer({ maxBytes: 3, defaultEncoding: 'UTF-8', ...(label ? { transportLayerEncodingLabel: label } : {}) });
  sniffer.write(body.subarray(0, 3));
  return decodeWith(body, sniffer.encoding);
}

/** Pure: a page's text for the parse stage: decodeJson for a JSON content type, decodeHtml for the rest. */
export function decodePage(body: Buffer, contentType: string | undefined): string {
  return isJsonContentType(contentType) ? decodeJson(body, contentType) : decodeHtml(body, contentType);
}
