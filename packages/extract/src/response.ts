import type * as cheerio from 'cheerio';
import { NonRetryableError, isJsonContentType, type Spider } from '@crawlfleet/core';
import { extractParsed, type Extraction, type PageMeta } from './extract.js';
import { extractJson } from './extract-json.js';
import type { JsonValue } from './json-path.js';
import { parseHtml, type HtmlParser } from './parse-html.js';

/** A fetched page as the parse stage has it: its decoded text, its Content-Type and its (final) URL. */
export interface PageResponse {
  body: string;
  contentType: string | undefined;
  url: string;
}

/** A page parsed once: an HTML tree (cheerio) or a JSON value, for the rules and for code hooks. */
export type ParsedDocument = { kind: 'html'; $: cheerio.CheerioAPI } | { kind: 'json'; value: JsonValue };

/** What the rules gave, and the parsed document they read. */
export interface ResponseExtraction extends Extraction {
  doc: ParsedDocument;
}

/** Pure: the kind of page a Content-Type names: JSON (see isJsonContentType), else HTML. */
export function pageKind(contentType: string | undefined): ParsedDocument['kind'] {
  return isJsonContentType(contentType) ? 'json' : 'html';
}

/**
 * Pure: a page parsed by its kind, once. A JSON page whose text is not JSON throws a
 * NonRetryableError `ERR_PARSE` naming the JSON error (parsing it again cannot help).
 */
export function parseResponse(page: PageResponse, parser?: HtmlParser): ParsedDocument {
  if (pageKind(page.contentType) === 'html') return { kind: 'html', $: parseHtml(page.body, parser).$ };
  try {
    return { kind: 'json', value: JSON.parse(page.body) as JsonValue };
  } catch (err) {
    throw new NonRetryableError('ERR_PARSE', `not valid JSON (${page.contentType}): ${(err as Error).message}`, { url: page.url }, { cause: err });
  }
}

/**
 * Pure: the page-kind dispatch of the parse stage. An HTML page gets the css rules, a JSON page the
 * json rules; both give the same Extraction, plus the parsed document.
 */
export function extractResponse(page: PageResponse, spider: Spider, meta: PageMeta, parser?: HtmlParser): ResponseExtraction {
  const doc = parseResponse(page, parser);
  const extraction = doc.kind === 'html' ? extractParsed(doc.$, page.url, spider, meta) : extractJson(doc.value, page.url, spider, meta);
  return { ...extraction, doc };
}
