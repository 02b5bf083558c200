import { CODE_KEYS, loadSpiderDefinition, type SpiderDefinitionFile, type Spider } from '@crawlfleet/core';

/**
 * Loads and checks a spider, throwing a ConfigError that names the file, the path and the problem.
 * A module is compiled and imported and its exported shape checked; its hooks are not run.
 */
export async function checkSpider(file: string): Promise<SpiderDefinitionFile> {
  return loadSpiderDefinition(file);
}

const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** Pure: the line `validate` prints for a valid spider; a code spider's hooks and module hash too. */
export function describeSpider(spider: Spider, file: string, module?: SpiderDefinitionFile['module']): string {
  const line = `ok: ${spider.name} (${file}): ${count(spider.follow.length, 'follow rule')}, ${count(spider.items.length, 'item rule')}, ${count(spider.startUrls.length, 'start URL')}`;
  if (!module) return line;
  const hooks = CODE_KEYS.filter((k) => k !== 'schemas' && module.code[k] !== undefined);
  const schemas = Object.keys(module.code.schemas ?? {});
  const code = [...(hooks.length > 0 ? [`hooks ${hooks.join(', ')}`] : []), ...(schemas.length > 0 ? [`schemas for ${schemas.join(', ')}`] : [])];
  return `${line}; code: ${code.join('; ')}; module hash ${module.ref.hash}`;
}

/** `crawlfleet validate SPIDER`: exit 0 with one line, or 2 (a ConfigError) naming the file, path and problem. */
export async function validateCommand(file: string): Promise<number> {
  const { spider, module } = await checkSpider(file);
  process.stdout.write(`${describeSpider(spider, file, module)}\n`);
  return 0;
}
