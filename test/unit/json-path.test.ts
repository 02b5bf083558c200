import { Schema } from 'mongoose';
import { ConfigError, NonRetryableError, isJsonContentType, validateSpider } from '@crawlfleet/core';
import { compileJsonPath, evaluateJsonPath, extractResponse, firstJsonMatch, jsonFieldValue, pageKind, parseJsonPath } from '@crawlfleet/extract';
import { decodeJson, decodePage } from '@crawlfleet/fetch';
import { fieldSchemaType } from '@crawlfleet/storage';

const meta = { crawlId: 'c1', fetchedAt: '2026-12-02T10:00:00.000Z' };
const stamp = { spider: 'api', crawlId: 'c1', fetchedAt: meta.fetchedAt };

describe('JSON path syntax', () => {
  test.each([
    ['$', []],
    ['a', [{ kind: 'key', key: 'a' }]],
    [
      'author.name',
      [
        { kind: 'key', key: 'author' },
        { kind: 'key', key: 'name' },
      ],
    ],
    [
      '$.author.name',
      [
        { kind: 'key', key: 'author' },
        { kind: 'key', key: 'name' },
      ],
    ],
    [
      'images[0]',
      [
        { kind: 'key', key: 'images' },
        { kind: 'index', index: 0 },
      ],
    ],
    ['$[12]', [{ kind: 'index', index: 12 }]],
    ['tags[*]', [{ kind: 'key', key: 'tags' }, { kind: 'wildcard' }]],
    ['items[*].id', [{ kind: 'key', key: 'items' }, { kind: 'wildcard' }, { kind: 'key', key: 'id' }]],
    ['["odd key"]', [{ kind: 'key', key: 'odd key' }]],
    [
      'a["x.y"]["q\\"uote"].b',
      [
        { kind: 'key', key: 'a' },
        { kind: 'key', key: 'x.y' },
        { kind: 'key', key: 'q"uote' },
        { kind: 'key', key: 'b' },
      ],
    ],
    [
      "a['it\\'s']",
      [
        { kind: 'key', key: 'a' },
        { kind: 'key', key: "it's" },
      ],
    ],
    ['@id', [{ kind: 'key', key: '@id' }]],
    [
      '$ref.x-y',
      [
        { kind: 'key', key: '$ref' },
        { kind: 'key', key: 'x-y' },
      ],
    ],
    ['a[*][0][*]', [{ kind: 'key', key: 'a' }, { kind: 'wildcard' }, { kind: 'index', index: 0 }, { kind: 'wildcard' }]],
  ])('%s parses', (path, steps) => {
    expect(parseJsonPath(path)).toEqual(steps);
  });

  test.each([
    ['', 'an empty path (use "$" for the scope itself) at character 1'],
    ['.a', 'a path that starts with "." (write "a.b" or "$.a.b") at character 1'],
    ['a..b', 'expected a key, found "." at character 3'],
    ['a.', 'a "." with no key after it at character 2'],
    ['$.', 'a "." with no key after it at character 2'],
    ['a[', 'expected an index (0, 1, ...), "*" or a quoted key inside "[ ]" at character 3'],
    ['a[x]', 'expected an index (0, 1, ...), "*" or a quoted key inside "[ ]" at character 3'],
    ['a[-1]', 'expected an index (0, 1, ...), "*" or a quoted key inside "[ ]" at character 3'],
    ['a[1', 'expected "]" after an index at character 4'],
    ['a[*', 'expected "]" after "[*" at character 4'],
    ['a["b', 'an unterminated quoted key at character 3'],
    ['a["b"', 'expected "]" after a quoted key at character 6'],
    ['a b', 'expected ".", "[" or the end of the path, found " " at character 2'],
    ['tags[*]x', 'expected ".", "[" or the end of the path, found "x" at character 8'],
  ])('%j is refused: %s', (path, problem) => {
    expect(() => parseJsonPath(path)).toThrow(`invalid JSON path ${JSON.stringify(path)}: ${problem}`);
  });
});

describe('JSON path evaluation', () => {
  const doc = {
    author: { name: 'Ann', 'odd key': 1, nested: { deep: [10, 20] } },
    images: ['a.png', 'b.png'],
    tags: ['x', 'y'],
    items: [{ id: 1, tags: ['p'] }, { id: 2, tags: [] }, { name: 'no id' }, { id: null, tags: ['q', 'r'] }],
    empty: [],
    nothing: null,
  };

  test.each([
    ['$', [doc]],
    ['$.author.name', ['Ann']],
    ['author.name', ['Ann']],
    ['author["odd key"]', [1]],
    ['author.nested.deep[1]', [20]],
    ['images[0]', ['a.png']],
    ['images[2]', []],
    ['tags[*]', ['x', 'y']],
    ['items[*].id', [1, 2, null]],
    ['items[*].tags[*]', ['p', 'q', 'r']],
    ['items[0]', [doc.items[0]]],
    ['author[*]', ['Ann', 1, doc.author.nested]],
    ['empty[*]', []],
    ['nothing', [null]],
    ['nothing.x', []],
    ['missing', []],
    ['missing[*].id', []],
    ['tags.length', []],
    ['items.id', []],
    ['author[0]', []],
  ])('%s selects %j', (path, expected) => {
    expect(evaluateJsonPath(path, doc)).toEqual(expected);
  });

  test('a compiled path is reused; firstJsonMatch is the first value or undefined', () => {
    const path = compileJsonPath('items[*].id');
    expect(evaluateJsonPath(path, doc)).toEqual([1, 2, null]);
    expect(firstJsonMatch(path, doc)).toBe(1);
    expect(firstJsonMatch('missing', doc)).toBeUndefined();
    expect(firstJsonMatch('$', 'scalar')).toBe('scalar');
  });

  test('only own keys are read', () => {
    expect(evaluateJsonPath('constructor', {})).toEqual([]);
    expect(evaluateJsonPath('__proto__', JSON.parse('{"__proto__": 5}'))).toEqual([5]);
  });
});

describe('json field values', () => {
  const url = 'http://api.test/v1/products/7';
  test.each([
    ['a number with no type keeps its JSON type', 12.5, {}, 12.5],
    ['a boolean with no type keeps its JSON type', false, {}, false],
    ['a string is trimmed, as css text is', ' Café ', {}, 'Café'],
    ['a number with type number stays that number', 12.5, { type: 'number' }, 12.5],
    ['a number with type integer is truncated', 12.5, { type: 'integer' }, 12],
    ['a number with type string is its text', 12.5, { type: 'string' }, '12.5'],
    ['a numeric string with type number', '1,234.50', { type: 'number' }, 1234.5],
    ['a string with type integer that is not a number', 'abc', { type: 'integer' }, null],
    ['a string with type boolean', 'no', { type: 'boolean' }, false],
    ['a boolean with type boolean', true, { type: 'boolean' }, true],
    ['a regex on a number gives text', 12.5, { pattern: /(\d+)\./ }, '12'],
    ['a regex with a type', 'EUR 12.50', { pattern: /([0-9.]+)/, type: 'number' }, 12.5],
    ['a regex that does not match', 'free', { pattern: /(\d+)/ }, null],
    ['absolute resolves against the page', '../img/a b.png', { absolute: true }, 'http://api.test/v1/img/a%20b.png'],
    ['null is null', null, {}, null],
    ['missing is null', undefined, {}, null],
    ['an object with no type or regex is kept as it is', { count: 3 }, {}, { count: 3 }],
    ['an array with no type or regex is kept as it is', [1, 'a'], {}, [1, 'a']],
    ['an object with a type does not convert', { count: 3 }, { type: 'integer' }, null],
    ['an array with a regex does not convert', ['a'], { pattern: /a/ }, null],
  ] as const)('%s', (_what, value, field, expected) => {
    expect(jsonFieldValue(value, field, url)).toEqual(expected);
  });
});

describe('extractResponse on JSON pages', () => {
  const spider = validateSpider({
    name: 'api',
    follow: [{ json: 'next' }, { json: 'items[*].id', format: '/api/products/{}?full=1', deny: ['/api/products/2\\?'] }, { json: 'links[*]', allow: ['^https?://api\\.test/'] }, { css: 'a' }],
    items: [
      {
        type: 'listing',
        match: '/api/products\\?',
        eachJson: 'items',
        key: 'id',
        fields: {
          id: { json: 'id', type: 'integer', required: true },
          name: { json: 'name' },
          price: { json: 'price', type: 'number' },
          tags: { json: 'tags', all: true },
          firstTag: { json: 'tags[0]' },
          meta: { json: 'meta' },
        },
      },
      { type: 'page', fields: { total: { json: '$.total' }, ids: { json: '$.items[*].id', all: true, type: 'string' }, scope: { json: '$.missing' } } },
      { type: 'html', fields: { title: { css: 'title' } } },
    ],
  });
  const body = JSON.stringify({
    total: 4,
    items: [
      { id: 1, name: 'Café Crème', price: 12.5, tags: ['a', 'b'], meta: { new: true } },
      { id: '2', name: '東京', price: '3.00', tags: [] },
      { name: 'no id' },
      { id: 'a/b c', price: null, tags: 'solo' },
    ],
    next: '/api/products?page=2#top',
    links: ['http://api.test/x', 'https://elsewhere.test/y', 'mailto:a@b.c', 7, null, { href: '/z' }, true],
  });
  const url = 'http://api.test/api/products?page=1';
  const page = extractResponse({ body, contentType: 'application/json; charset=utf-8', url }, spider, meta);

  test('eachJson makes one item per element; fields are relative to it, converted, with all and objects', () => {
    expect(page.items.filter((i) => i.type === 'listing')).toEqual([
      { type: 'listing', url, id: 1, name: 'Café Crème', price: 12.5, tags: ['a', 'b'], firstTag: 'a', meta: { new: true }, ...stamp },
      { type: 'listing', url, id: 2, name: '東京', price: 3, tags: [], firstTag: null, meta: null, ...stamp },
    ]);
  });

  test('an element missing a required field is dropped and counted invalid', () => {
    // { name: 'no id' } has no id; { id: 'a/b c' } is not an integer.
    expect(page.invalid).toBe(2);
  });

  test('a rule without eachJson reads the document; `$.` paths read from the scope', () => {
    expect(page.items.filter((i) => i.type === 'page')).toEqual([{ type: 'page', url, total: 4, ids: ['1', '2', 'a/b c'], scope: null, ...stamp }]);
  });

  test('css rules do not apply to a JSON page, and json rules not to an HTML page', () => {
    expect(page.items.map((i) => i.type)).not.toContain('html');
    const html = extractResponse({ body: '<title>T</title><a href="/a">a</a>', contentType: 'text/html', url }, spider, meta);
    expect(html.items).toEqual([{ type: 'html', url, title: 'T', ...stamp }]);
    expect(html.links).toEqual(['http://api.test/a']);
    expect(html.doc.kind).toBe('html');
  });

  test('json follow rules: strings and numbers (nothing else), through format URL-encoded, resolved, canonical, unique, allow and deny applied', () => {
    expect(page.links).toEqual([
      'http://api.test/api/products?page=2',
      'http://api.test/api/products/1?full=1',
      'http://api.test/api/products/a%2Fb%20c?full=1',
      'http://api.test/x',
      'http://api.test/api/7',
    ]);
  });

  test('an eachJson that selects elements (items[*]) or an array gives the same items; one that selects an object gives that one item', () => {
    const rule = (eachJson: string) => validateSpider({ name: 'api', items: [{ type: 't', eachJson, fields: { id: { json: 'id' } } }] });
    const doc = JSON.stringify({ items: [{ id: 1 }, { id: 2 }], one: { id: 3 }, nested: [[{ id: 4 }], [{ id: 5 }]] });
    const ids = (eachJson: string) => extractResponse({ body: doc, contentType: 'application/json', url }, rule(eachJson), meta).items.map((i) => i.id);
    expect(ids('items')).toEqual([1, 2]);
    expect(ids('items[*]')).toEqual([1, 2]);
    expect(ids('$.items')).toEqual([1, 2]);
    expect(ids('one')).toEqual([3]);
    expect(ids('nested[*]')).toEqual([4, 5]);
    expect(ids('missing')).toEqual([]);
  });

  test('the parsed document is returned for code hooks', () => {
    expect(page.doc.kind).toBe('json');
    expect(page.doc.kind === 'json' && (page.doc.value as { total: number }).total).toBe(4);
  });

  test('a top-level array, and a scalar document', () => {
    const s = validateSpider({ name: 'api', items: [{ type: 't', eachJson: '$', fields: { v: { json: '$' } } }], follow: [{ json: '$[*]', format: '/p/{}' }] });
    const arr = extractResponse({ body: '[1, "two", 3.5]', contentType: 'application/json', url }, s, meta);
    expect(arr.items.map((i) => i.v)).toEqual([1, 'two', 3.5]);
    expect(arr.links).toEqual(['http://api.test/p/1', 'http://api.test/p/two', 'http://api.test/p/3.5']);
    expect(extractResponse({ body: '"x"', contentType: 'application/json', url }, s, meta).items.map((i) => i.v)).toEqual(['x']);
  });

  test('a body that is not JSON is a NonRetryableError ERR_PARSE naming the JSON error', () => {
    let error: unknown;
    try {
      extractResponse({ body: '{"a": ', contentType: 'application/json', url }, spider, meta);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(NonRetryableError);
    expect(error).toMatchObject({ code: 'ERR_PARSE', context: { url }, message: expect.stringMatching(/^not valid JSON \(application\/json\): .*JSON/) });
  });
});

describe('JSON pages: content types and decoding', () => {
  test.each([
    ['application/json', true],
    ['application/json; charset=utf-8', true],
    ['Application/JSON;charset=UTF-8', true],
    ['text/json', true],
    ['application/ld+json', true],
    ['application/vnd.api+json; ext="bulk"', true],
    ['application/problem+json', true],
    ['text/html', false],
    ['application/jsonp', false],
    ['application/json-seq', false],
    ['application/x-ndjson', false],
    ['text/plain', false],
    ['', false],
    [undefined, false],
  ])('%s is JSON: %s', (type, expected) => {
    expect(isJsonContentType(type)).toBe(expected);
    expect(pageKind(type)).toBe(expected ? 'json' : 'html');
  });

  test('UTF-8 by default, a byte-order mark first, then the charset parameter; no HTML sniffing', () => {
    const text = '{"name":"Café 東京"}';
    expect(decodeJson(Buffer.from(text), 'application/json')).toBe(text);
    expect(decodeJson(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]), 'application/json')).toBe(text);
    expect(decodeJson(Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]), 'application/json; charset=iso-8859-1')).toBe(text);
    expect(decodeJson(Buffer.from('{"name":"caf\xe9"}', 'latin1'), 'application/json; charset=iso-8859-1')).toBe('{"name":"café"}');
    expect(decodeJson(Buffer.from(text), 'application/json; charset=nonsense')).toBe(text);
    // A <meta charset> inside a JSON string is data, not a declaration.
    const meta = '{"html":"<meta charset=\\"windows-1251\\">é"}';
    expect(decodeJson(Buffer.from(meta), 'application/json')).toBe(meta);
    expect(decodePage(Buffer.from(meta), 'application/json')).toBe(meta);
    expect(decodePage(Buffer.from('<p>caf\xe9</p>', 'latin1'), 'text/html')).toBe('<p>café</p>');
  });
});

describe('the spider schema for json rules', () => {
  function issues(spider: Record<string, unknown>): string[] {
    try {
      validateSpider({ name: 'api', ...spider }, 'api.json');
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).issues;
    }
    return [];
  }

  test('a json rule validates: field paths, eachJson, follow json and format', () => {
    expect(
      issues({
        follow: [
          { json: 'items[*].id', format: '/api/products/{}', allow: ['x'], deny: ['y'] },
          { css: 'a.next', attr: 'data-href' },
        ],
        items: [
          {
            type: 'p',
            eachJson: 'items',
            key: 'id',
            fields: { id: { json: 'id', type: 'integer', required: true }, tags: { json: 'tags[*]', all: true }, url2: { json: '$["link"]', absolute: true, regex: '(.*)' } },
          },
          { type: 'q', each: 'div', fields: { a: { css: 'a', attr: 'href' } } },
          { type: 'r', fields: {} },
        ],
      }),
    ).toEqual([]);
  });

  test.each([
    ['a field with neither css nor json', { items: [{ type: 't', fields: { a: { type: 'number' } } }] }, ['api.json: items[0].fields.a: a field needs exactly one of css or json']],
    ['a field with both css and json', { items: [{ type: 't', fields: { a: { css: 'h1', json: 'a' } } }] }, ['api.json: items[0].fields.a: a field needs exactly one of css or json']],
    [
      'css and json fields in one rule',
      { items: [{ type: 't', fields: { a: { css: 'h1' }, b: { json: 'b' }, c: { css: 'p' } } }] },
      ['api.json: items[0].fields.b: a rule\'s fields are all css or all json: "a" uses css, "b" uses json'],
    ],
    [
      'each with json fields',
      { items: [{ type: 't', each: 'div', fields: { a: { json: 'a' } } }] },
      ['api.json: items[0].each: each is a CSS selector and needs css fields, but "a" uses json (use eachJson)'],
    ],
    ['eachJson with css fields', { items: [{ type: 't', eachJson: 'items', fields: { a: { css: 'a' } } }] }, ['api.json: items[0].eachJson: eachJson needs json fields, but "a" uses css (use each)']],
    ['each and eachJson both', { items: [{ type: 't', each: 'div', eachJson: 'items', fields: {} }] }, ['api.json: items[0].eachJson: a rule has each (css) or eachJson (json), not both']],
    ['a bad field path', { items: [{ type: 't', fields: { a: { json: 'a..b' } } }] }, ['api.json: items[0].fields.a.json: invalid JSON path "a..b": expected a key, found "." at character 3']],
    [
      'a bad eachJson path',
      { items: [{ type: 't', eachJson: 'items[', fields: { a: { json: 'a' } } }] },
      ['api.json: items[0].eachJson: invalid JSON path "items[": expected an index (0, 1, ...), "*" or a quoted key inside "[ ]" at character 7'],
    ],
    ['attr on a json field', { items: [{ type: 't', fields: { a: { json: 'a', attr: 'href' } } }] }, ['api.json: items[0].fields.a.attr: attr applies to css fields only']],
    ['a follow rule with neither css nor json', { follow: [{ allow: ['x'] }] }, ['api.json: follow[0]: a follow rule needs exactly one of css or json']],
    ['a follow rule with both', { follow: [{ css: 'a', json: 'next' }] }, ['api.json: follow[0]: a follow rule needs exactly one of css or json']],
    ['a bad follow path', { follow: [{ json: '.next' }] }, ['api.json: follow[0].json: invalid JSON path ".next": a path that starts with "." (write "a.b" or "$.a.b") at character 1']],
    ['a format with no placeholder', { follow: [{ json: 'ids[*]', format: '/p/id' }] }, ['api.json: follow[0].format: format needs exactly one "{}" placeholder']],
    ['a format with two placeholders', { follow: [{ json: 'ids[*]', format: '/p/{}/{}' }] }, ['api.json: follow[0].format: format needs exactly one "{}" placeholder']],
    ['format on a css follow rule', { follow: [{ css: 'a', format: '/p/{}' }] }, ['api.json: follow[0].format: format applies to json follow rules only']],
    ['attr on a json follow rule', { follow: [{ json: 'next', attr: 'href' }] }, ['api.json: follow[0].attr: attr applies to css follow rules only']],
    ['a key that is not a json field', { items: [{ type: 't', key: 'sku', fields: { id: { json: 'id' } } }] }, ['api.json: items[0].key: key "sku" is not one of the fields']],
  ])('%s', (_what, spider, expected) => {
    expect(issues(spider)).toEqual(expected);
  });
});

describe('the store types of json fields', () => {
  test('a json field with no type or regex is Mixed (its JSON type kept); with a type, that type', () => {
    expect(fieldSchemaType({ json: 'stock' })).toEqual({ type: Schema.Types.Mixed });
    expect(fieldSchemaType({ json: 'tags[*]', all: true })).toEqual([{ type: Schema.Types.Mixed }]);
    expect(fieldSchemaType({ json: 'price', type: 'number' })).toEqual({ type: Number });
    expect(fieldSchemaType({ json: 'price', regex: '(\\d+)' })).toEqual({ type: String });
    expect(fieldSchemaType({})).toEqual({ type: String });
  });
});
