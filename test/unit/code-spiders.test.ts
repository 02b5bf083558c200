import { existsSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as cheerio from 'cheerio';
import { ConfigError, SpiderHookError, loadSpiderDefinition, pruneSpiderCache, splitSpiderModule, validateSpider, type LoadedSpiderModule, type SpiderCode } from '@crawlfleet/core';
import { runPageHooks, type HookPage } from '@crawlfleet/extract';
import { requestShape } from '@crawlfleet/fetch';
import { decodeRequest, encodeRequest } from '@crawlfleet/frontier';
import { follow, z } from '@crawlfleet/sdk';

const spider = validateSpider({ name: 'unit', startUrls: ['http://127.0.0.1:8080/'], itemKeys: { product: 'sku' } });

function moduleOf(code: SpiderCode): LoadedSpiderModule {
  return { ref: { path: '/spiders/unit.ts', hash: '0123456789abcdef' }, spider, code, locate: () => 'unit.ts:7' };
}

function page(html: string, over: Partial<HookPage> = {}): HookPage {
  return {
    url: 'http://127.0.0.1:8080/shop/p1.html',
    requestedUrl: 'http://127.0.0.1:8080/shop/p1.html',
    status: 200,
    headers: { 'content-type': 'text/html' },
    contentType: 'text/html',
    text: html,
    doc: { kind: 'html', $: cheerio.load(html) },
    crawlId: 'c1',
    fetchedAt: '2026-12-03T00:00:00.000Z',
    depth: 2,
    meta: { from: 'list' },
    ...over,
  };
}

const stamp = { spider: 'unit', crawlId: 'c1', fetchedAt: '2026-12-03T00:00:00.000Z' };

describe('runPageHooks: a code spider over one page', () => {
  test("yielded items are stamped, links resolve against the page with their depth and metadata, and the rules' results come first", async () => {
    const html = '<h1>Lamp</h1><span class="sku">L-1</span><a class="rel" href="../shop/p2.html">p2</a>';
    const out = await runPageHooks(
      moduleOf({
        *parse(p: { $: cheerio.CheerioAPI; url: string }, ctx: { depth: number; meta: Record<string, unknown>; rules: { items: unknown[] } }) {
          yield { type: 'product', sku: p.$('.sku').text(), name: p.$('h1').text(), from: ctx.meta.from, ruleItems: ctx.rules.items.length };
          yield follow(p.$('a.rel').attr('href')!, { meta: { parent: 'L-1' } });
          yield follow('/shop/list-2.html', { depth: ctx.depth });
          yield 'mailto:someone@example.com';
        },
      } as unknown as SpiderCode),
      page(html),
      spider,
      { items: [{ type: 'rule', url: 'http://127.0.0.1:8080/shop/p1.html', ...stamp }], links: ['http://127.0.0.1:8080/shop/ruled.html'], invalid: 1 },
    );
    expect(out.items).toEqual([
      { type: 'rule', url: 'http://127.0.0.1:8080/shop/p1.html', ...stamp },
      { type: 'product', sku: 'L-1', name: 'Lamp', from: 'list', ruleItems: 1, url: 'http://127.0.0.1:8080/shop/p1.html', ...stamp },
    ]);
    expect(out.links).toEqual([
      { url: 'http://127.0.0.1:8080/shop/ruled.html', depth: 3 },
      { url: 'http://127.0.0.1:8080/shop/p2.html', depth: 3, meta: { parent: 'L-1' } },
      { url: 'http://127.0.0.1:8080/shop/list-2.html', depth: 2 },
    ]);
    expect(out).toMatchObject({ invalid: 1, invalidReasons: [] });
  });

  test('a returned {items, links} object and an async generator serve as well', async () => {
    const returned = await runPageHooks(moduleOf({ parse: () => ({ items: [{ type: 'product', sku: 'A' }], links: ['p9.html'] }) } as unknown as SpiderCode), page('<p>x</p>'), spider, {
      items: [],
      links: [],
      invalid: 0,
    });
    expect(returned.items.map((i) => i.sku)).toEqual(['A']);
    expect(returned.links).toEqual([{ url: 'http://127.0.0.1:8080/shop/p9.html', depth: 3 }]);
    const generated = await runPageHooks(
      moduleOf({
        async *parse() {
          await Promise.resolve();
          yield { type: 'product', sku: 'B' };
        },
      } as unknown as SpiderCode),
      page('<p>x</p>'),
      spider,
      { items: [], links: [], invalid: 0 },
    );
    expect(generated.items.map((i) => i.sku)).toEqual(['B']);
  });

  test('the item hook transforms or drops, the schema and the key field check, each drop with its reason', async () => {
    const out = await runPageHooks(
      moduleOf({
        parse: () => [
          { type: 'product', sku: 'ok', price: '12.50' },
          { type: 'product', sku: 'bad', price: 'n/a' },
          { type: 'product', price: '1' },
          { type: 'product', sku: 'held', price: '2' },
          { sku: 'no-type' },
          { type: 'product', sku: 'null', price: '3' },
        ],
        item: (item: Record<string, unknown>) => {
          if (item.sku === 'held') throw new Error('held back');
          if (item.sku === 'null') return null;
          return { ...item, seen: true };
        },
        schemas: { product: z.looseObject({ price: z.coerce.number().positive() }) },
      } as unknown as SpiderCode),
      page('<p>x</p>'),
      spider,
      { items: [], links: [], invalid: 0 },
    );
    expect(out.items).toEqual([{ type: 'product', sku: 'ok', price: 12.5, seen: true, url: 'http://127.0.0.1:8080/shop/p1.html', ...stamp }]);
    expect(out.invalid).toBe(5);
    expect(out.invalidReasons).toEqual([
      'parse hook gave an item without a valid "type" (letters, digits, "_" and "-", starting with a letter)',
      'product: price: Invalid input: expected number, received NaN',
      'product: missing its key field "sku"',
      'product: item hook: held back (unit.ts:7)',
      'product: dropped by the item hook',
    ]);
  });

  test('a parse hook that throws fails the page with the hook, the place and the message', async () => {
    const failing = moduleOf({
      parse: () => {
        throw new RangeError('no layout');
      },
    } as unknown as SpiderCode);
    const err = await runPageHooks(failing, page('<p>x</p>'), spider, { items: [], links: [], invalid: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SpiderHookError);
    expect(err).toMatchObject({ code: 'ERR_SPIDER_HOOK', message: 'parse hook threw at unit.ts:7: RangeError: no layout' });
  });

  test('a parse hook that never settles fails the page after limits.timeoutMs', async () => {
    const quick = validateSpider({ name: 'unit', startUrls: ['http://127.0.0.1:8080/'], limits: { timeoutMs: 150 } });
    const hanging = moduleOf({ parse: () => new Promise(() => undefined) } as unknown as SpiderCode);
    const err = await runPageHooks(hanging, page('<p>x</p>'), quick, { items: [], links: [], invalid: 0 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ERR_SPIDER_HOOK', message: 'parse hook threw at unit.ts:7: did not finish within 150 ms (limits.timeoutMs)' });
  });

  test('a schema that throws or refines asynchronously, an item changed in place, and read-only rule results', async () => {
    const out = await runPageHooks(
      moduleOf({
        parse: () => [
          { type: 'product', sku: 'async-ok', price: 5 },
          { type: 'product', sku: 'async-bad', price: -1 },
          { type: 'product', sku: 'boom', price: 1 },
          { type: 'product', sku: 'retyped', price: 1 },
        ],
        item: (item: Record<string, unknown>) => {
          if (item.sku === 'retyped') item.type = '';
        },
        schemas: {
          product: z
            .looseObject({ price: z.number() })
            .refine(async (p) => (p.price as number) > 0, 'price must be positive')
            .transform((p) => {
              if (p.sku === 'boom') throw new Error('transform failed');
              return p;
            }),
        },
      } as unknown as SpiderCode),
      page('<p>x</p>'),
      spider,
      { items: [], links: [], invalid: 0 },
    );
    expect(out.items.map((i) => i.sku)).toEqual(['async-ok']);
    expect(out.invalidReasons).toEqual([
      'product: (item): price must be positive',
      'product: schema hook: transform failed (unit.ts:7)',
      'product: the item hook returned something that is not an item with a valid "type"',
    ]);
    const pushes = moduleOf({
      parse: (_p: unknown, ctx: { rules: { items: unknown[] } }) => {
        ctx.rules.items.push({ type: 'product', sku: 'x' });
      },
    } as unknown as SpiderCode);
    await expect(runPageHooks(pushes, page('<p>x</p>'), spider, { items: [], links: [], invalid: 0 })).rejects.toMatchObject({ code: 'ERR_SPIDER_HOOK' });
  });

  test('link metadata must be small JSON; a generator past the deadline stops', async () => {
    const big = moduleOf({ parse: () => [follow('/a', { meta: { blob: 'x'.repeat(5000) } })] } as unknown as SpiderCode);
    await expect(runPageHooks(big, page('<p>x</p>'), spider, { items: [], links: [], invalid: 0 })).rejects.toMatchObject({
      code: 'ERR_SPIDER_HOOK',
      message: expect.stringContaining('meta is 5011 bytes of JSON; at most 4096'),
    });
    let yielded = 0;
    const endless = moduleOf({
      async *parse() {
        for (;;) {
          await new Promise((r) => setTimeout(r, 5));
          yielded++;
          yield { type: 'product', sku: String(yielded) };
        }
      },
    } as unknown as SpiderCode);
    const quick = validateSpider({ name: 'unit', startUrls: ['http://127.0.0.1:8080/'], limits: { timeoutMs: 100 } });
    await expect(runPageHooks(endless, page('<p>x</p>'), quick, { items: [], links: [], invalid: 0 })).rejects.toMatchObject({ code: 'ERR_SPIDER_HOOK' });
    await new Promise((r) => setTimeout(r, 50));
    const after = yielded;
    await new Promise((r) => setTimeout(r, 100));
    expect(yielded).toBe(after);
  });

  test("without a module the rules' results pass through unchanged", async () => {
    const rules = { items: [{ type: 'rule', url: 'u', ...stamp }], links: ['http://127.0.0.1:8080/a'], invalid: 2 };
    expect(await runPageHooks(undefined, page(''), spider, rules)).toEqual({ items: rules.items, links: [{ url: 'http://127.0.0.1:8080/a', depth: 3 }], invalid: 2, invalidReasons: [] });
  });
});

describe('requestShape: what a request hook returned, as a request', () => {
  test('headers lower-cased, cookies joined into one header, an object body as JSON', () => {
    expect(requestShape(undefined)).toBeUndefined();
    expect(requestShape({ headers: { 'X-Api-Key': 'k' }, cookies: { session: 's', theme: 'dark' } })).toEqual({ method: 'GET', headers: { 'x-api-key': 'k', cookie: 'session=s; theme=dark' } });
    expect(requestShape({ method: 'post', body: { q: 'lamp' } })).toEqual({ method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"q":"lamp"}' });
    expect(requestShape({ method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'raw' })).toEqual({ method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'raw' });
  });

  test('a wrong answer names its problem', () => {
    expect(() => requestShape({ header: {} })).toThrow('unknown key(s) "header"');
    expect(() => requestShape({ method: 'FETCH' })).toThrow('method must be one of');
    expect(() => requestShape({ body: 'x' })).toThrow('a GET request has no body');
    expect(() => requestShape({ method: 'HEAD' })).toThrow('method must be one of GET, POST, PUT, PATCH, DELETE');
    expect(() => requestShape({ headers: { Host: 'evil' } })).toThrow('header "Host" is set by the fetcher');
    expect(() => requestShape({ headers: { a: 1 } })).toThrow('header "a" must be a string');
    expect(() => requestShape('x')).toThrow('must return an object');
  });

  test("setCookies: Set-Cookie lines for the request's session, refused without one", () => {
    expect(requestShape({ setCookies: ['token=abc; Path=/'] }, { session: true })).toEqual({ method: 'GET', headers: {}, setCookies: ['token=abc; Path=/'] });
    expect(requestShape({ setCookies: [] }, { session: false })).toEqual({ method: 'GET', headers: {} });
    expect(() => requestShape({ setCookies: ['token=abc'] }, { session: false })).toThrow('setCookies needs a session, and this spider keeps none (sessions.enabled is false)');
    expect(() => requestShape({ setCookies: 'token=abc' }, { session: true })).toThrow('setCookies must be a list of Set-Cookie lines');
  });
});

describe('spider modules', () => {
  const dir = mkdtempSync(join(tmpdir(), 'spider-modules-'));

  test('splitSpiderModule separates settings from code, and names every wrong hook', () => {
    const parse = () => undefined;
    const { spider: settings, code } = splitSpiderModule({ name: 'm', startUrls: ['http://127.0.0.1:1/'], parse }, 'm.ts');
    expect(settings.name).toBe('m');
    expect(code).toEqual({ parse });
    const err = (() => {
      try {
        splitSpiderModule({ name: 'm', folow: [], parse: 'no', schemas: { book: {} } }, 'm.ts');
      } catch (e) {
        return e as ConfigError;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect(err!.issues).toEqual(['m.ts: (top level): unknown key(s) "folow"', 'm.ts: parse: must be a function, got string', 'm.ts: schemas.book: must be a zod schema (an object with safeParse)']);
    expect(() => splitSpiderModule(undefined, 'm.ts')).toThrow('must export its spider as the default export');
  });

  test('a TypeScript module with a local import compiles; its hash covers its own files; a data-only module is a plain spider', async () => {
    writeFileSync(join(dir, 'helper.ts'), 'export const tax = (p: number): number => Math.round(p * 120) / 100;\n');
    writeFileSync(
      join(dir, 'shop.ts'),
      "import { defineSpider } from '@crawlfleet/sdk';\nimport { tax } from './helper.js';\nexport default defineSpider({ name: 'shop', startUrls: ['http://127.0.0.1:1/'], *parse() { yield { type: 'x', v: tax(10) }; } });\n",
    );
    const first = await loadSpiderDefinition(join(dir, 'shop.ts'));
    expect(first.module?.ref).toEqual({ path: join(dir, 'shop.ts'), hash: expect.stringMatching(/^[0-9a-f]{16}$/) });
    expect(typeof first.module?.code.parse).toBe('function');
    writeFileSync(join(dir, 'helper.ts'), 'export const tax = (p: number): number => Math.round(p * 121) / 100;\n');
    const changed = await loadSpiderDefinition(join(dir, 'shop.ts'));
    expect(changed.module!.ref.hash).not.toBe(first.module!.ref.hash);

    writeFileSync(join(dir, 'data.mjs'), "export default { name: 'data', startUrls: ['http://127.0.0.1:1/'] };\n");
    const data = await loadSpiderDefinition(join(dir, 'data.mjs'));
    expect(data.module).toBeUndefined();
    expect(data.spider.name).toBe('data');
  });

  test('a compile error names the file, line and problem; an error thrown by a hook is located in the source', async () => {
    writeFileSync(join(dir, 'broken.ts'), "export default {\n  name: 'broken',\n  parse( {\n};\n");
    await expect(loadSpiderDefinition(join(dir, 'broken.ts'))).rejects.toThrow('broken.ts:4:2: Expected ")" but found ";"');
    const thrower =
      "import { defineSpider } from '@crawlfleet/sdk';\n\nexport default defineSpider({\n  name: 'thrower',\n  parse() {\n    const n: number = 1;\n    throw new Error('bad ' + n);\n  },\n});\n";
    writeFileSync(join(dir, 'thrower.ts'), thrower);
    const { module } = await loadSpiderDefinition(join(dir, 'thrower.ts'));
    let thrown: unknown;
    try {
      (module!.code.parse as () => void)();
    } catch (err) {
      thrown = err;
    }
    expect(module!.locate(thrown)).toBe('thrower.ts:7');
  });
});

test('the bundle cache loses bundles unused for a week, keeps the others', async () => {
  const cache = mkdtempSync(join(tmpdir(), 'spider-cache-'));
  const [old, recent, other] = ['a.ts-1.mjs', 'a.ts-2.mjs', 'notes.txt'].map((n) => join(cache, n));
  for (const f of [old!, recent!, other!]) writeFileSync(f, '');
  const eightDaysAgo = (Date.now() - 8 * 24 * 3600_000) / 1000;
  utimesSync(old!, eightDaysAgo, eightDaysAgo);
  utimesSync(other!, eightDaysAgo, eightDaysAgo);
  expect(await pruneSpiderCache(cache)).toBe(1);
  expect([existsSync(old!), existsSync(recent!), existsSync(other!)]).toEqual([false, true, true]);
});

test("a link's metadata survives the frontier", () => {
  const request = { url: 'http://a/b', depth: 3, referer: 'http://a/', meta: { id: 7, tags: ['x'] } };
  expect(decodeRequest(encodeRequest(request))).toEqual(request);
  expect(decodeRequest(encodeRequest({ url: 'http://a/b', depth: 0 }))).toEqual({ url: 'http://a/b', depth: 0 });
});
