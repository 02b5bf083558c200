import { Parser } from 'htmlparser2';

/** What block detection needs to know of a page, read without building a DOM. */
export interface PageSummary {
  /** the first `<title>`, whitespace collapsed */
  title: string;
  /** the visible text (whitespace collapsed), up to the first `maxChars + 1` characters */
  text: string;
  /** the page has at most `maxChars` characters of visible text */
  short: boolean;
  /** inputs a person types into (text, email, password, search, ...) and textareas */
  textInputs: number;
  /** password inputs among them */
  passwordInputs: number;
}

/** Elements whose content a reader never sees as text. */
const INVISIBLE = new Set(['script', 'style', 'noscript', 'template', 'svg', 'math', 'iframe', 'object', 'textarea', 'select']);
/** Input types that do not take typed text. */
const NON_TEXT_INPUTS = new Set(['hidden', 'submit', 'button', 'image', 'reset', 'checkbox', 'radio', 'file', 'color', 'range']);
const CHUNK_CHARS = 16 * 1024;

/**
 * Pure: the title and the visible text of an HTML page, with htmlparser2 (cheerio's own tokenizer),
 * so scripts, styles, comments and attributes never count as text. Reading stops as soon as the page
 * proves longer than `maxChars`: a long page is content, and that is all the caller needs to know.
 */
export function summarizePage(html: string, maxChars: number): PageSummary {
  let hidden = 0;
  let titleOpen = false;
  let title: string | undefined;
  let textInputs = 0;
  let passwordInputs = 0;
  // The visible text so far, whitespace collapsed; a tag boundary separates words, as in a browser.
  let text = '';
  let boundary = false;
  let long = false;
  const parser = new Parser(
    {
      onopentag(name, attribs) {
        if (name === 'title' && title === undefined && hidden === 0) {
          titleOpen = true;
          title = '';
          return;
        }
        const type = (attribs.type ?? 'text').toLowerCase();
        if (name === 'textarea' || (name === 'input' && !NON_TEXT_INPUTS.has(type))) textInputs++;
        if (name === 'input' && type === 'password') passwordInputs++;
        if (INVISIBLE.has(name)) hidden++;
        boundary = true;
      },
      ontext(chunk) {
        if (titleOpen) title += chunk;
        else if (hidden === 0 && !long) {
          let piece = ((boundary ? ' ' : '') + chunk).replace(/\s+/g, ' ');
          if (text === '' || text.endsWith(' ')) piece = piece.trimStart();
          text += piece;
          boundary = false;
          if (text.trimEnd().length > maxChars) long = true;
        }
      },
      onclosetag(name) {
        if (name === 'title' && titleOpen) titleOpen = false;
        else if (INVISIBLE.has(name) && hidden > 0) hidden--;
        boundary = true;
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  for (let i = 0; i < html.length && !long; i += CHUNK_CHARS) parser.write(html.slice(i, i + CHUNK_CHARS));
  if (!long) parser.end();
  return { title: (title ?? '').replace(/\s+/g, ' ').trim(), text: text.trim().slice(0, maxChars + 1), short: !long, textInputs, passwordInputs };
}
