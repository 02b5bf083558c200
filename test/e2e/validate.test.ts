import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, runCli, tempDir, writeJson } from '../helpers/cli.js';

const env = { ...process.env, LOG_LEVEL: 'warn' };
const example = JSON.parse(readFileSync(join(ROOT, 'examples', 'books.json'), 'utf8'));

describe('crawlfleet --version', () => {
  test("prints the root package.json's version and exits 0", async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    for (const flag of ['--version', '-V']) {
      const run = await runCli([flag], { env });
      expect(run.code).toBe(0);
      expect(run.stdout).toBe(`${version}\n`);
    }
  });
});

describe('crawlfleet validate SPIDER', () => {
  const dir = tempDir('validate');

  test('a valid spider: exit 0 and one line with its name, file and rule counts', async () => {
    const run = await runCli(['validate', 'examples/books.json'], { env });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('ok: books (examples/books.json): 2 follow rules, 2 item rules, 1 start URL\n');
    const one = writeJson(dir, 'one.json', { name: 'one', startUrls: ['http://a.example/', 'http://b.example/'], follow: [{ css: 'a' }], items: [example.items[1]] });
    const single = await runCli(['validate', one], { env });
    expect(single.code).toBe(0);
    expect(single.stdout).toBe(`ok: one (${one}): 1 follow rule, 1 item rule, 2 start URLs\n`);
  });

  test('a misspelt key: exit 2 naming the file and the key path', async () => {
    const top = writeJson(dir, 'folow.json', { ...example, folow: [{ css: 'a' }] });
    let run = await runCli(['validate', top], { env });
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(`${top}: (top level): unknown key(s) "folow"`);

    const book = example.items[1];
    const nested = writeJson(dir, 'atr.json', { ...example, items: [{ ...book, fields: { ...book.fields, rating: { css: 'p.star-rating', atr: 'class' } } }] });
    run = await runCli(['validate', nested], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`${nested}: items[0].fields.rating: unknown key(s) "atr"`);
  });

  test('an invalid regex: exit 2 naming the file, the path and the problem', async () => {
    const file = writeJson(dir, 'regex.json', { ...example, follow: [{ css: 'a', allow: ['(unclosed'] }] });
    const run = await runCli(['validate', file], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(new RegExp(`${file.replace(/[.]/g, '\\.')}: follow\\[0\\]\\.allow\\[0\\]: invalid regular expression`));
  });

  test('a missing or unreadable file: exit 2 naming it', async () => {
    const missing = join(dir, 'missing.json');
    let run = await runCli(['validate', missing], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`${missing}: cannot read spider file: ENOENT`);
    const folder = join(dir, 'folder.json');
    mkdirSync(folder);
    run = await runCli(['validate', folder], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`${folder}: cannot read spider file: EISDIR`);
  });

  test('a YAML syntax error: exit 2 naming the file', async () => {
    const file = join(dir, 'broken.yaml');
    writeFileSync(file, 'name: books\nstartUrls: [http://127.0.0.1:8080/\nfollow:\n  - css: a\n');
    const run = await runCli(['validate', file], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`${file}: not valid YAML`);
  });
});

describe('an item rule that makes several items per page needs a key (#19)', () => {
  const dir = tempDir('identity');
  const notes = {
    type: 'note',
    each: 'div.note',
    fields: { text: { css: 'i' }, link: { css: 'a', attr: 'href', absolute: true } },
  };
  const spider = { name: 'notes', startUrls: ['http://127.0.0.1:1/'], allowPrivateAddresses: true, items: [example.items[1], notes] };
  const refusal = (file: string) =>
    `crawlfleet: invalid spider:\n  ${file}: items[1]: "each" makes one item per element, but without "key" every item of a page is identified by the page's URL, so the sinks would keep one of them; name a field that tells them apart: "key": "link"\n`;

  test('validate, seed and crawl refuse `each` without `key`: exit 2 naming the file, the rule and a key to use', async () => {
    const file = writeJson(dir, 'notes.json', spider);
    for (const command of ['validate', 'seed', 'crawl']) {
      const run = await runCli([command, file], { env: { ...env, REDIS_URL: 'redis://127.0.0.1:1' } });
      expect({ command, code: run.code, stdout: run.stdout, stderr: run.stderr }).toEqual({ command, code: 2, stdout: '', stderr: refusal(file) });
    }
    const keyed = writeJson(dir, 'keyed.json', { ...spider, items: [example.items[1], { ...notes, key: 'link' }] });
    expect((await runCli(['validate', keyed], { env })).code).toBe(0);
  });

  test('`key: "url"` with eachJson is refused too, and a rule with no field to suggest says how to add one', async () => {
    const file = writeJson(dir, 'rows.json', {
      name: 'rows',
      items: [{ type: 'row', eachJson: 'rows', key: 'url', fields: { title: { json: 'title' }, tags: { json: 'tags[*]', all: true } } }],
    });
    const run = await runCli(['validate', file], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      `crawlfleet: invalid spider:\n  ${file}: items[0].key: "eachJson" makes one item per element, but "url" is the page's URL, the same for every item of a page, so the sinks would keep one of them; add a field that tells them apart and name it in "key" (for example "id": { "json": "id" } and "key": "id")\n`,
    );
  });

  test('the spiders shipped with crawlfleet all pass', async () => {
    for (const file of [
      'examples/books.json',
      'examples/books-compose.json',
      'examples/json-api.json',
      'examples/books.ts',
      'examples/json-api.ts',
      'test/fixtures/spiders/members.ts',
      'test/fixtures/spiders/picky.ts',
      'test/fixtures/spiders/failing.ts',
    ]) {
      const run = await runCli(['validate', file], { env });
      expect({ file, code: run.code, stderr: run.stderr }).toEqual({ file, code: 0, stderr: '' });
    }
  });
});
