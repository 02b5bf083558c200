/**
 * Where htmlparser2 builds another tree than the WHATWG tree builder (parse5, a browser) would.
 *
 * htmlparser2 only closes the element on top of its stack and never moves a node, while the standard
 * reopens misnested formatting elements (`<b>`, `<a>`, ...), foster-parents what is misplaced in a
 * table, closes a `<p>` or `<li>` from deeper down, and ignores some end tags. These pure rules name
 * every step where the two may part; a page that takes none of them gets the same tree from both
 * (after the fix-ups in parse5-shape.ts), and any other page is parsed with parse5. The rules are
 * conservative: some pages they send to parse5 would have come out the same.
 */

/** The active formatting elements: closing one early makes parse5 reopen (clone) it later. */
export const FORMATTING = new Set(['a', 'b', 'big', 'code', 'em', 'font', 'i', 'nobr', 's', 'small', 'strike', 'strong', 'tt', 'u']);

/** Elements whose content parse5 keeps as raw text (with scripting on, as cheerio parses). */
export const RAW_TEXT = new Set(['noscript', 'iframe', 'noembed', 'noframes', 'xmp']);

/** What `<head>` may hold; anything else makes parse5 close the head and open the body. */
export const HEAD_CONTENT = new Set(['base', 'basefont', 'bgsound', 'link', 'meta', 'title', 'noscript', 'noframes', 'style', 'script', 'template']);

const HEADINGS = new Set(['h1', 'h2', 'h3', 'h4', 'h5', 'h6']);
/** The scope boundaries of "has an element in scope". */
const SCOPE_BOUNDARY = new Set(['applet', 'caption', 'html', 'table', 'td', 'th', 'marquee', 'object', 'template', 'svg', 'math']);
/** End tags that parse5 honours by popping up to their element, whatever (non-boundary) lies above it. */
const BLOCK_END = new Set([
  'address',
  'article',
  'aside',
  'blockquote',
  'button',
  'center',
  'details',
  'dialog',
  'dir',
  'div',
  'dl',
  'fieldset',
  'figcaption',
  'figure',
  'footer',
  'header',
  'hgroup',
  'listing',
  'main',
  'menu',
  'nav',
  'ol',
  'pre',
  'search',
  'section',
  'summary',
  'ul',
  'li',
  'dd',
  'dt',
  'p',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'body',
  'html',
]);
/** Start tags that make parse5 close a `<p>` in button scope. */
const CLOSES_P = new Set([
  'address',
  'article',
  'aside',
  'blockquote',
  'center',
  'details',
  'dialog',
  'dir',
  'div',
  'dl',
  'fieldset',
  'figcaption',
  'figure',
  'footer',
  'header',
  'hgroup',
  'main',
  'menu',
  'nav',
  'ol',
  'p',
  'search',
  'section',
  'summary',
  'ul',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'pre',
  'listing',
  'form',
  'plaintext',
  'table',
  'hr',
  'xmp',
  'li',
  'dd',
  'dt',
]);
/** The subset that htmlparser2 closes `<p>` for too (when the `<p>` is the current element); `table` is left out: in quirks mode parse5 nests it. */
const HTMLPARSER2_CLOSES_P = new Set([
  'address',
  'article',
  'aside',
  'blockquote',
  'details',
  'div',
  'dl',
  'fieldset',
  'figcaption',
  'figure',
  'footer',
  'form',
  'header',
  'hr',
  'main',
  'nav',
  'ol',
  'p',
  'pre',
  'section',
  'ul',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
]);
/** Elements an open tag closes in both parsers, when they are the current element. */
const SAFE_OPEN_CLOSES = new Map<string, Set<string>>([
  ['tr', new Set(['tr', 'td', 'th'])],
  ['td', new Set(['td', 'th'])],
  ['th', new Set(['td', 'th'])],
  ['li', new Set(['li'])],
  ['dd', new Set(['dd', 'dt'])],
  ['dt', new Set(['dd', 'dt'])],
  ['option', new Set(['option'])],
  ['optgroup', new Set(['option', 'optgroup'])],
  ['rt', new Set(['rt', 'rp'])],
  ['rp', new Set(['rt', 'rp'])],
  ['tbody', new Set(['thead', 'tbody'])],
  ['tfoot', new Set(['thead', 'tbody'])],
  ['body', new Set(['head'])],
  ...[...HTMLPARSER2_CLOSES_P].map((tag) => [tag, new Set(['p'])] as [string, Set<string>]),
]);
/** What each table element may hold without parse5 foster-parenting it out of the table. */
const TABLE_CONTENT = new Map<string, Set<string>>([
  ['table', new Set(['caption', 'colgroup', 'col', 'thead', 'tbody', 'tfoot', 'tr', 'script', 'style', 'template'])],
  ['thead', new Set(['tr', 'script', 'style', 'template'])],
  ['tbody', new Set(['tr', 'script', 'style', 'template'])],
  ['tfoot', new Set(['tr', 'script', 'style', 'template'])],
  ['tr', new Set(['td', 'th', 'script', 'style', 'template'])],
  ['colgroup', new Set(['col', 'template'])],
]);
const SELECT_CONTENT = new Set(['option', 'optgroup', 'hr', 'script', 'template']);
/** The standard's "special" elements (HTML ones), which an ordinary end tag never pops. */
const SPECIAL = new Set([
  'address',
  'applet',
  'area',
  'article',
  'aside',
  'base',
  'basefont',
  'bgsound',
  'blockquote',
  'body',
  'br',
  'button',
  'caption',
  'center',
  'col',
  'colgroup',
  'dd',
  'details',
  'dir',
  'div',
  'dl',
  'dt',
  'embed',
  'fieldset',
  'figcaption',
  'figure',
  'footer',
  'form',
  'frame',
  'frameset',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'head',
  'header',
  'hgroup',
  'hr',
  'html',
  'iframe',
  'img',
  'input',
  'keygen',
  'li',
  'link',
  'listing',
  'main',
  'marquee',
  'menu',
  'meta',
  'nav',
  'noembed',
  'noframes',
  'noscript',
  'object',
  'ol',
  'p',
  'param',
  'plaintext',
  'pre',
  'script',
  'search',
  'section',
  'select',
  'source',
  'style',
  'summary',
  'table',
  'tbody',
  'td',
  'template',
  'textarea',
  'tfoot',
  'th',
  'thead',
  'title',
  'tr',
  'track',
  'ul',
  'wbr',
  'xmp',
  'svg',
  'math',
  'foreignobject',
  'desc',
]);
/** SVG elements whose content is HTML again. */
const SVG_HTML_INSIDE = new Set(['foreignobject', 'desc', 'title']);
/** Elements parse5 renames or treats in ways htmlparser2 does not. */
const UNSUPPORTED = new Set(['image', 'isindex', 'plaintext', 'frameset', 'math', 'select', 'html', 'head', 'body']);

/** The open elements, the current one first (htmlparser2's own order). */
export type OpenElements = readonly string[];

function indexInScope(open: OpenElements, from: number, tag: string, boundaries: ReadonlySet<string>): number {
  for (let i = from; i < open.length; i++) {
    if (open[i] === tag) return i;
    if (boundaries.has(open[i]!)) return -1;
  }
  return -1;
}

const BUTTON_SCOPE = new Set([...SCOPE_BOUNDARY, 'button']);
const LIST_SCOPE = new Set([...SCOPE_BOUNDARY, 'ol', 'ul', 'menu', 'dl']);

/**
 * Pure: does opening `tag` (already on top when not void) take a step where parse5 builds another
 * tree? `open` is htmlparser2's stack after its own implied closes, without `tag`.
 */
export function openDiverges(tag: string, open: OpenElements, seenBody: boolean): boolean {
  const parent = open[0];
  if (parent !== undefined) {
    const allowed = TABLE_CONTENT.get(parent);
    if (allowed && !allowed.has(tag)) return true;
    if (parent === 'select' || parent === 'optgroup' || (parent === 'option' && open.includes('select'))) {
      if (!SELECT_CONTENT.has(tag)) return true;
    }
  }
  if ((tag === 'td' || tag === 'th') && parent !== 'tr') return true;
  if (tag === 'tr' && parent === 'table') return false; // parse5 adds the tbody; the fix-up does too
  if (UNSUPPORTED.has(tag)) {
    if (tag === 'image') return !open.includes('svg');
    if (tag === 'html') return open.length > 0;
    if (tag === 'head') return open.length !== 1 || open[0] !== 'html' || seenBody;
    if (tag === 'body') return seenBody || open.some((t) => t !== 'html');
    if (tag === 'select') return open.includes('select');
    return true;
  }
  if (FORMATTING.has(tag) && (tag === 'a' || tag === 'nobr') && indexInScope(open, 0, tag, SCOPE_BOUNDARY) !== -1) return true;
  if (tag === 'form' && open.includes('form')) return true;
  if (tag === 'button' && indexInScope(open, 0, 'button', SCOPE_BOUNDARY) !== -1) return true;
  if (HEADINGS.has(tag) && parent !== undefined && HEADINGS.has(parent)) return true;
  if (tag === 'li' && indexInScope(open, 0, 'li', LIST_SCOPE) !== -1) return true;
  if ((tag === 'dd' || tag === 'dt') && (indexInScope(open, 0, 'dd', LIST_SCOPE) !== -1 || indexInScope(open, 0, 'dt', LIST_SCOPE) !== -1)) return true;
  if (CLOSES_P.has(tag) && indexInScope(open, 0, 'p', BUTTON_SCOPE) !== -1) return true;
  return false;
}

/**
 * Pure: htmlparser2 closed `closed` because `tag` opened. Safe only where parse5 closes it too.
 */
export function openCloseDiverges(tag: string, closed: string): boolean {
  return !(SAFE_OPEN_CLOSES.get(tag)?.has(closed) ?? false);
}

/**
 * Pure: the end tag `tag` made htmlparser2 close `implied` (the elements above it) first. parse5 does
 * the same for a block's end tag when nothing closed is a formatting element (which it would reopen)
 * or a scope boundary (which would make it ignore the end tag); inside a raw-text element all of it
 * is text anyway. In SVG, an end tag closes whatever SVG elements are open above its own.
 */
export function endCloseDiverges(tag: string, implied: readonly string[], inSvg: boolean): boolean {
  if (RAW_TEXT.has(tag)) return false;
  // In SVG, parse5 pops up to the end tag's element as htmlparser2 does, unless HTML sits in between.
  if (inSvg) return implied.some((t) => SVG_HTML_INSIDE.has(t));
  // parse5 pops to any other element (adoption agency included) only over ordinary phrasing elements.
  if (!BLOCK_END.has(tag)) return implied.some((t) => SPECIAL.has(t) || FORMATTING.has(t) || UNSUPPORTED.has(t));
  return implied.some((t) => FORMATTING.has(t) || SCOPE_BOUNDARY.has(t) || RAW_TEXT.has(t) || UNSUPPORTED.has(t));
}

/**
 * Pure: an end tag htmlparser2 ignores because its element is not open. parse5 honours a heading's
 * end tag for any open heading, and a `</body>` or `</html>` moves what follows into the body.
 */
export function ignoredEndDiverges(tag: string, open: OpenElements): boolean {
  if (HEADINGS.has(tag)) return open.some((t) => HEADINGS.has(t));
  return false;
}

/** Elements whose text htmlparser2 and parse5 both take as written. */
const SCRIPT_LIKE = new Set(['script', 'style']);

/**
 * Pure: text directly in a table (not in a cell) is foster-parented by parse5; a `</` not followed
 * by a letter is an end tag without a name or a bogus comment to parse5, and text to htmlparser2.
 */
export function textDiverges(text: string, open: OpenElements): boolean {
  const parent = open[0];
  if (parent !== undefined && TABLE_CONTENT.has(parent) && /[^\t\n\f\r ]/.test(text)) return true;
  return text.includes('</') && /<\/(?![A-Za-z])/.test(text) && !(parent !== undefined && SCRIPT_LIKE.has(parent));
}
