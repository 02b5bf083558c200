import { loadSpiderFile, type Spider } from '@crawlfleet/core';

/**
 * Loads and checks a spider, throwing a ConfigError that names the file, the path and the problem.
 * The one place `validate` reads a spider: checks of code-spider modules belong here.
 */
export async function checkSpider(file: string): Promise<Spider> {
  return loadSpiderFile(file);
}

const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** Pure: the line `validate` prints for a valid spider. */
export function describeSpider(spider: Spider, file: string): string {
  return `ok: ${spider.name} (${file}): ${count(spider.follow.length, 'follow rule')}, ${count(spider.items.length, 'item rule')}, ${count(spider.startUrls.length, 'start URL')}`;
}

/** `crawlfleet validate SPIDER`: exit 0 with one line, or 2 (a ConfigError) naming the file, path and problem. */
export async function validateCommand(file: string): Promise<number> {
  const spider = await checkSpider(file);
  process.stdout.write(`${describeSpider(spider, file)}\n`);
  return 0;
}
