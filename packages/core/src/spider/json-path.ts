/**
 * The syntax of the spider format's JSON paths, parsed into steps. It lives in core because the spider
 * schema validates paths; @crawlfleet/extract evaluates them (packages/extract/src/json-path.ts).
 *
 * A path is relative to a scope (the page's document, or the element an `eachJson` chose):
 * - `$` is the scope itself; a leading `$.` or `$[` reads from it (`$.a.b` is `a.b`);
 * - `a.b` reads object keys: a bare key is any run of characters other than `.`, `[`, `]`, quotes and
 *   whitespace;
 * - `[0]` an array index (from 0), `[*]` every element of an array (or every value of an object);
 * - `["odd key"]` or `['odd key']` a quoted key (a double-quoted one is a JSON string, escapes and all).
 */
export type JsonPathStep = { kind: 'key'; key: string } | { kind: 'index'; index: number } | { kind: 'wildcard' };

export class JsonPathSyntaxError extends Error {}

const BARE_KEY = /[^.[\]"'\s]+/y;

function fail(source: string, at: number, problem: string): never {
  throw new JsonPathSyntaxError(`invalid JSON path ${JSON.stringify(source)}: ${problem} at character ${at + 1}`);
}

function readBareKey(source: string, at: number): { key: string; end: number } | undefined {
  BARE_KEY.lastIndex = at;
  const m = BARE_KEY.exec(source);
  return m ? { key: m[0], end: at + m[0].length } : undefined;
}

/** A quoted key starting at `at` (on its quote), and where it ends (after the closing quote). */
function readQuoted(source: string, at: number): { key: string; end: number } {
  const quote = source[at]!;
  let i = at + 1;
  while (i < source.length && source[i] !== quote) i += source[i] === '\\' ? 2 : 1;
  if (i >= source.length) fail(source, at, 'an unterminated quoted key');
  const body = source.slice(at + 1, i);
  if (quote === '"') {
    try {
      return { key: JSON.parse(`"${body}"`) as string, end: i + 1 };
    } catch {
      fail(source, at, 'a quoted key that is not a valid JSON string');
    }
  }
  return { key: body.replace(/\\(.)/g, '$1'), end: i + 1 };
}

/** Pure: a path's steps; throws JsonPathSyntaxError naming the problem and where it is. */
export function parseJsonPath(source: string): JsonPathStep[] {
  if (source === '') fail(source, 0, 'an empty path (use "$" for the scope itself)');
  const steps: JsonPathStep[] = [];
  let i = 0;
  if (source[0] === '$' && (source.length === 1 || source[1] === '.' || source[1] === '[')) {
    i = 1;
    if (source[1] === '.') {
      i = 2;
      if (i >= source.length) fail(source, i - 1, 'a "." with no key after it');
      // `$.key`: the key is read by the loop below as a path's first key.
    }
  } else if (source[0] === '.') {
    fail(source, 0, 'a path that starts with "." (write "a.b" or "$.a.b")');
  }
  let expectKey = i === 0 ? source[0] !== '[' : source[1] === '.';
  while (i < source.length) {
    if (expectKey) {
      const bare = readBareKey(source, i);
      if (!bare) fail(source, i, `expected a key, found ${JSON.stringify(source[i])}`);
      steps.push({ kind: 'key', key: bare.key });
      i = bare.end;
      expectKey = false;
      continue;
    }
    const c = source[i]!;
    if (c === '.') {
      if (i + 1 >= source.length) fail(source, i, 'a "." with no key after it');
      expectKey = true;
      i++;
      continue;
    }
    if (c === '[') {
      const next = source[i + 1];
      if (next === '*') {
        if (source[i + 2] !== ']') fail(source, i + 2, 'expected "]" after "[*"');
        steps.push({ kind: 'wildcard' });
        i += 3;
      } else if (next === '"' || next === "'") {
        const quoted = readQuoted(source, i + 1);
        if (source[quoted.end] !== ']') fail(source, quoted.end, 'expected "]" after a quoted key');
        steps.push({ kind: 'key', key: quoted.key });
        i = quoted.end + 1;
      } else {
        const m = /^\d+/.exec(source.slice(i + 1));
        if (!m) fail(source, i + 1, 'expected an index (0, 1, ...), "*" or a quoted key inside "[ ]"');
        const end = i + 1 + m[0].length;
        if (source[end] !== ']') fail(source, end, 'expected "]" after an index');
        const index = Number(m[0]);
        if (!Number.isSafeInteger(index)) fail(source, i + 1, 'an index too large');
        steps.push({ kind: 'index', index });
        i = end + 1;
      }
      continue;
    }
    fail(source, i, `expected ".", "[" or the end of the path, found ${JSON.stringify(c)}`);
  }
  return steps;
}

/** Pure: the problem with a path, or undefined when it parses. */
export function jsonPathProblem(source: string): string | undefined {
  try {
    parseJsonPath(source);
    return undefined;
  } catch (err) {
    if (err instanceof JsonPathSyntaxError) return err.message;
    throw err;
  }
}
