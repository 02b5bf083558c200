import { DomHandler, type Document } from 'domhandler';
import { Parser } from 'htmlparser2';
import { endCloseDiverges, ignoredEndDiverges, openCloseDiverges, openDiverges, RAW_TEXT, textDiverges } from './tree-divergence.js';

/**
 * htmlparser2 10.1's own state, read (never written) to see each step as it is taken. Pinned in
 * package.json; the extraction-parity test fails if a new version moves these.
 */
interface ParserState {
  /** open element names, the current one first */
  stack: string[];
  /** the start tag being opened, '' between tags */
  tagname: string;
  ended: boolean;
}

/** Whether the parse took a step where parse5 would build another tree (see tree-divergence.ts). */
interface Watch {
  diverged: boolean;
  /** the first step where the trees part, for the logs and tests */
  reason?: string;
  seenBody: boolean;
  /** elements an end tag has closed on its way to its own element */
  impliedByEnd: string[];
}

function diverge(watch: Watch, reason: string): void {
  watch.diverged = true;
  watch.reason = reason;
}

const state = (parser: Parser) => parser as unknown as ParserState;
const insideRawText = (open: readonly string[]) => open.some((t) => RAW_TEXT.has(t));

class WatchingHandler extends DomHandler {
  constructor(private readonly watch: Watch) {
    super(undefined, { withStartIndices: true, withEndIndices: true });
  }

  private get open(): ParserState {
    return state((this as unknown as { parser: Parser }).parser);
  }

  override onclosetag(name?: string, isImplied?: boolean): void {
    const parser = this.open;
    if (name !== undefined && !this.watch.diverged && !parser.ended) {
      if (isImplied && name !== parser.tagname) {
        if (parser.tagname !== '') {
          if (openCloseDiverges(parser.tagname, name)) diverge(this.watch, `<${parser.tagname}> closes <${name}>`);
        } else this.watch.impliedByEnd.push(name);
      } else if (!isImplied && this.watch.impliedByEnd.length > 0) {
        if (!insideRawText(parser.stack) && endCloseDiverges(name, this.watch.impliedByEnd, name === 'svg' || parser.stack.includes('svg')))
          diverge(this.watch, `</${name}> closes <${this.watch.impliedByEnd.join('>, <')}>`);
        this.watch.impliedByEnd = [];
      }
    }
    super.onclosetag();
  }

  override ontext(data: string): void {
    if (!this.watch.diverged && textDiverges(data, this.open.stack)) diverge(this.watch, `text in <${this.open.stack[0]}>`);
    super.ontext(data);
  }
}

class WatchingParser extends Parser {
  constructor(
    handler: DomHandler,
    private readonly watch: Watch,
  ) {
    super(handler, { decodeEntities: true });
  }

  override onopentagname(start: number, endIndex: number): void {
    super.onopentagname(start, endIndex);
    const { stack, tagname } = state(this);
    if (this.watch.diverged) return;
    const open = stack[0] === tagname ? stack.slice(1) : stack;
    if (!insideRawText(open) && openDiverges(tagname, open, this.watch.seenBody)) diverge(this.watch, `<${tagname}> in <${open.slice(0, 2).join('> in <')}>`);
    if (tagname === 'body') this.watch.seenBody = true;
  }

  override onclosetag(start: number, endIndex: number): void {
    const { stack } = state(this);
    if (!this.watch.diverged && !insideRawText(stack)) {
      const name = (this as unknown as { getSlice(s: number, e: number): string }).getSlice(start, endIndex).toLowerCase();
      if (!stack.includes(name) && ignoredEndDiverges(name, stack)) diverge(this.watch, `</${name}> with <${stack[0]}> open`);
    }
    super.onclosetag(start, endIndex);
  }
}

/**
 * Pure: the page parsed by htmlparser2 (with source positions), or the first step where parse5 would
 * have built another tree.
 */
export function parseWatched(html: string): { doc: Document } | { reason: string } {
  const watch: Watch = { diverged: false, seenBody: false, impliedByEnd: [] };
  const handler = new WatchingHandler(watch);
  const parser = new WatchingParser(handler, watch);
  parser.end(html);
  return watch.reason !== undefined ? { reason: watch.reason } : { doc: handler.root };
}
