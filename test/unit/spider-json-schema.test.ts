import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { spiderJsonSchema, validateSpider } from '@crawlfleet/core';
import { ROOT } from '../helpers/cli.js';

const committedPath = join(ROOT, 'schemas', 'spider.schema.json');
const committed = JSON.parse(readFileSync(committedPath, 'utf8')) as Record<string, unknown>;

function compile() {
  const ajv = new Ajv2020({ allErrors: true, strict: true });
  addFormats.default(ajv);
  return ajv.compile(committed);
}

const minimal = { name: 'books', startUrls: ['http://127.0.0.1:8080/index.html'] };

describe('the JSON Schema of the spider format (schemas/spider.schema.json)', () => {
  test('the committed file is what the generator writes now (run `npm run build && npm run schema` after changing the zod schema)', () => {
    expect(committed).toEqual(spiderJsonSchema());
    // byte for byte, as scripts/spider-schema.mjs writes it
    expect(readFileSync(committedPath, 'utf8')).toBe(`${JSON.stringify(spiderJsonSchema(), null, 2)}\n`);
  });

  test('is draft 2020-12 with an $id, a title and a description, and rejects unknown keys', () => {
    expect(committed).toMatchObject({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      $id: 'https://crawlfleet.dev/schemas/spider.schema.json',
      title: expect.any(String),
      description: expect.any(String),
      type: 'object',
      required: ['name'],
      additionalProperties: false,
    });
  });

  test.each(readdirSync(join(ROOT, 'examples')).filter((f) => f.endsWith('.json')))('examples/%s validates (and the loader accepts it)', (file) => {
    const spider = JSON.parse(readFileSync(join(ROOT, 'examples', file), 'utf8'));
    const validate = compile();
    const valid = validate(spider);
    expect(valid ? [] : validate.errors).toEqual([]);
    expect(() => validateSpider(spider, file)).not.toThrow();
  });

  test('a "$schema" key is allowed, by the JSON Schema and by the loader', () => {
    const spider = { $schema: '../schemas/spider.schema.json', ...minimal };
    expect(compile()(spider)).toBe(true);
    expect(validateSpider(spider).name).toBe('books');
  });

  test('a misspelt top-level key is rejected, naming it', () => {
    const validate = compile();
    expect(validate({ ...minimal, folow: [{ css: 'a' }] })).toBe(false);
    expect(validate.errors).toContainEqual(expect.objectContaining({ keyword: 'additionalProperties', instancePath: '', params: { additionalProperty: 'folow' } }));
  });

  test('a misspelt key inside an item field is rejected, naming it and where it is', () => {
    const validate = compile();
    const spider = { ...minimal, items: [{ type: 'book', fields: { title: { css: 'h1', atr: 'title' } } }] };
    expect(validate(spider)).toBe(false);
    expect(validate.errors).toContainEqual(expect.objectContaining({ keyword: 'additionalProperties', instancePath: '/items/0/fields/title', params: { additionalProperty: 'atr' } }));
  });

  test('a wrong type is rejected, naming the path', () => {
    const validate = compile();
    expect(validate({ ...minimal, maxDepth: 'three' })).toBe(false);
    expect(validate.errors).toContainEqual(expect.objectContaining({ keyword: 'type', instancePath: '/maxDepth', params: { type: 'integer' } }));
    expect(validate({ ...minimal, items: [{ type: 'book', fields: { price: { css: '.price', type: 'float' } } }] })).toBe(false);
    expect(validate.errors).toContainEqual(expect.objectContaining({ keyword: 'enum', instancePath: '/items/0/fields/price/type' }));
    expect(validate({ startUrls: [] })).toBe(false);
    expect(validate.errors).toContainEqual(expect.objectContaining({ keyword: 'required', params: { missingProperty: 'name' } }));
  });
});
