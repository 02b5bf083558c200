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
