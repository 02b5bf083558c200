import * as cheerio from 'cheerio';
import type { Document } from 'domhandler';
import { shapeLikeParse5 } from './parse5-shape.js';
import { parseWatched } from './watched-parse.js';

/**
 * `auto`: htmlparser2 (parse+extract 1.4-1.8x cheaper on real pages) whenever it builds the same tree as parse5, else parse5;
 * `parse5`: always parse5, as cheerio does by default.
 */
export type HtmlParser = 'auto' | 'parse5';

export interface ParsedPage {
  $: cheerio.CheerioAPI;
  parser: 'htmlparser2' | 'parse5';
  /** why parse5 parsed it, under `auto` */
  reason?: string;
}

/**
 * Parses a page once, into the tree a browser builds (parse5's). htmlparser2 builds it, several times
 * faster, for the pages it gets right; any page where it would not is parsed by parse5.
 */
export function parseHtml(html: string, parser: HtmlParser = 'auto'): ParsedPage {
  if (parser === 'parse5') return { $: cheerio.load(html), parser: 'parse5' };
  const reason = htmlparser2Document(html);
  if (typeof reason !== 'string') return { $: cheerio.load(reason), parser: 'htmlparser2' };
  return { $: cheerio.load(html), parser: 'parse5', reason };
}

/** The page's parse5 tree built by htmlparser2, or why it cannot be. */
function htmlparser2Document(html: string): Document | string {
  // The standard's first step: CR LF and CR become LF, as parse5 does on input; NUL it treats apart.
  const source = html.includes('\r') ? html.replace(/\r\n?/g, '\n') : html;
  if (source.includes('\0')) return 'a NUL character';
  const parsed = parseWatched(source);
  if ('reason' in parsed) return parsed.reason;
  return shapeLikeParse5(parsed.doc, source) ?? parsed.doc;
}
