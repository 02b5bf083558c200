import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { loadSpiderFile } from '@crawlfleet/core';
import { BOOKS_ARCHIVE, serveFolder, unpack } from '../fixtures/static-site.mjs';
import { BOOK_FIELDS, booksTruth, expectBooksItems } from '../helpers/books-truth.js';
import { ROOT, comparable, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix } from '../helpers/cli.js';

const SCHEMA_FILE = join(ROOT, 'schemas', 'spider.schema.json');

describe('crawlfleet init NAME', () => {
  const prefix = uniquePrefix('init');
  const env = testEnv(prefix, { LOG_LEVEL: 'warn' });
  afterAll(() => dropPrefix(prefix));

  test('json (the default): a starter that validate accepts, naming the schema by its absolute path outside the repository', async () => {
    const dir = tempDir('init-json');
    const run = await runCli(['init', 'books'], { env, cwd: dir });
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toMatch(/\/books\.json$/);
    // JSON has no comments: the explanations go to stderr
    expect(run.stderr).toContain('allowPrivateAddresses  true only because 127.0.0.1:8080 is on loopback');
    const spider = JSON.parse(readFileSync(join(dir, 'books.json'), 'utf8'));
    expect(spider).toMatchObject({
      $schema: SCHEMA_FILE,
      name: 'books',
      startUrls: ['http://127.0.0.1:8080/index.html'],
      allowedDomains: ['127.0.0.1:8080'],
      allowPrivateAddresses: true,
    });
    const validated = await runCli(['validate', 'books.json'], { env, cwd: dir });
    expect(validated.code).toBe(0);
    expect(validated.stdout).toBe('ok: books (books.json): 2 follow rules, 2 item rules, 1 start URL\n');
  });

  test('inside the repository, "$schema" is a path relative to the output folder', async () => {
    mkdirSync(join(ROOT, 'data'), { recursive: true });
    const dir = mkdtempSync(join(ROOT, 'data', 'init-'));
    try {
      const run = await runCli(['init', 'local'], { env, cwd: dir });
      expect(run.code).toBe(0);
      expect(JSON.parse(readFileSync(join(dir, 'local.json'), 'utf8')).$schema).toBe('../../schemas/spider.schema.json');
      const yaml = await runCli(['init', 'local', '--format', 'yaml'], { env, cwd: dir });
      expect(yaml.code).toBe(0);
      expect(readFileSync(join(dir, 'local.yaml'), 'utf8').split('\n')[0]).toBe('# yaml-language-server: $schema=../../schemas/spider.schema.json');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('--url sets the start URL and allowedDomains; allowPrivateAddresses is true only on loopback', async () => {
    const dir = tempDir('init-url');
    const run = await runCli(['init', 'shop', '--url', 'https://shop.example.com:8443/catalogue/'], { env, cwd: dir });
    expect(run.code).toBe(0);
    expect(JSON.parse(readFileSync(join(dir, 'shop.json'), 'utf8'))).toMatchObject({
      startUrls: ['https://shop.example.com:8443/catalogue/'],
      allowedDomains: ['shop.example.com:8443'],
      allowPrivateAddresses: false,
    });
    const yaml = await runCli(['init', 'shop', '--format', 'yaml', '--url', 'https://shop.example.com/'], { env, cwd: dir });
    expect(yaml.code).toBe(0);
    const text = readFileSync(join(dir, 'shop.yaml'), 'utf8');
    expect(text).toContain('\nallowPrivateAddresses: false\n');
    expect(text).toContain('  - "shop.example.com"\n');
    for (const [url, loopback] of [
      ['http://localhost:3000/', true],
      ['http://[::1]:8080/', true],
      ['http://127.0.0.2/', true],
      ['http://10.0.0.5/', false],
    ] as const) {
      const name = `l${Math.random().toString(36).slice(2, 8)}`;
      expect((await runCli(['init', name, '--url', url], { env, cwd: dir })).code).toBe(0);
      expect(JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8')).allowPrivateAddresses).toBe(loopback);
    }
  });

  test('refuses to overwrite without --force, a bad NAME, a bad --url or --format: exit 2', async () => {
    const dir = tempDir('init-refuse');
    expect((await runCli(['init', 'books'], { env, cwd: dir })).code).toBe(0);
    const before = readFileSync(join(dir, 'books.json'), 'utf8');
    const again = await runCli(['init', 'books', '--url', 'http://127.0.0.1:9/'], { env, cwd: dir });
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`${join(dir, 'books.json')} already exists; pass --force to overwrite it`);
    expect(readFileSync(join(dir, 'books.json'), 'utf8')).toBe(before);
    const forced = await runCli(['init', 'books', '--url', 'http://127.0.0.1:9/', '--force'], { env, cwd: dir });
    expect(forced.code).toBe(0);
    expect(JSON.parse(readFileSync(join(dir, 'books.json'), 'utf8')).startUrls).toEqual(['http://127.0.0.1:9/']);

    const badName = await runCli(['init', '../escape'], { env, cwd: dir });
    expect(badName.code).toBe(2);
    expect(badName.stderr).toContain('"../escape" is not a spider name');
    expect((await runCli(['init', '-dash'], { env, cwd: dir })).code).toBe(2);
    expect((await runCli(['init', 'x', '--url', 'ftp://example.com/'], { env, cwd: dir })).code).toBe(2);
    expect((await runCli(['init', 'x', '--format', 'toml'], { env, cwd: dir })).code).toBe(2);
    expect(existsSync(join(dir, 'x.json'))).toBe(false);
  });

  test('ts: writes a code spider against @crawlfleet/sdk', async () => {
    const dir = tempDir('init-ts');
    const run = await runCli(['init', 'books', '--format', 'ts'], { env, cwd: dir });
    expect(run.code).toBe(0);
    const text = readFileSync(join(dir, 'books.ts'), 'utf8');
    expect(text).toContain("import { defineSpider, follow, z } from '@crawlfleet/sdk';");
    expect(text).toContain('export default defineSpider({');
    for (const hook of ['*parse(page, ctx)', 'request(url, ctx)', 'item(item, ctx)', 'schemas: {']) expect(text).toContain(hook);
  });

  test('json, yaml and ts starters crawl the books site to done with exactly the expected items', async () => {
    const root = unpack(BOOKS_ARCHIVE);
    const site = await serveFolder(root);
    try {
      const truth = booksTruth(root, site.url);
      const dir = tempDir('init-crawl');
      const url = `${site.url}/index.html`;
      expect((await runCli(['init', 'books', '--url', url], { env, cwd: dir })).code).toBe(0);
      expect((await runCli(['init', 'books', '--url', url, '--format', 'yaml'], { env, cwd: dir })).code).toBe(0);
      // the YAML starter is the JSON one with comments
      const { $schema, ...fromJson } = await loadSpiderFile(join(dir, 'books.json'));
      expect($schema).toBe(SCHEMA_FILE);
      expect(await loadSpiderFile(join(dir, 'books.yaml'))).toEqual(fromJson);

      for (const format of ['json', 'yaml']) {
        const validated = await runCli(['validate', `books.${format}`], { env, cwd: dir });
        expect(validated.code).toBe(0);
        const out = join(dir, `items-${format}.jsonl`);
        const run = await runCli(['crawl', `books.${format}`, '--crawl-id', `init-${format}`, '--out', out, '--json', '--quiet'], { env, cwd: dir });
        expect(run.code).toBe(0);
        const status = JSON.parse(run.stdout.trim().split('\n').pop()!);
        expect(status.state).toBe('done');
        expect(status.counters).toMatchObject({ items: 1180, written: 1180, invalid: 0, blocked: 0 });
        const items = readJsonl(out);
        expectBooksItems(items, truth);
        expect(items).toHaveLength(980 + 200);
      }

      // The TypeScript starter: its parse hook builds the 200 books, with a computed price band.
      expect((await runCli(['init', 'books', '--url', url, '--format', 'ts'], { env, cwd: dir })).code).toBe(0);
      const validated = await runCli(['validate', 'books.ts'], { env, cwd: dir });
      expect(validated.code).toBe(0);
      expect(validated.stdout).toMatch(/^ok: books \(books\.ts\): 1 follow rule, 0 item rules, 1 start URL; code: hooks parse, request, item; schemas for book; module hash [0-9a-f]{16}\n$/);
      const out = join(dir, 'items-ts.jsonl');
      const run = await runCli(['crawl', 'books.ts', '--crawl-id', 'init-ts', '--out', out, '--json', '--quiet'], { env, cwd: dir });
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout.trim().split('\n').pop()!)).toMatchObject({ state: 'done', counters: { items: 200, written: 200, invalid: 0 } });
      const band = (price: number) => (price < 20 ? 'budget' : price < 40 ? 'mid-range' : 'premium');
      const bookFields = [...BOOK_FIELDS, 'priceBand'];
      expect(comparable(readJsonl(out), bookFields)).toEqual(
        comparable(
          truth.details.map((d) => ({ ...d, priceBand: band(d.price) })),
          bookFields,
        ),
      );
    } finally {
      await site.close();
    }
  });
});
