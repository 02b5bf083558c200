import { extname, resolve } from 'node:path';
import { hasCode } from './code.js';
import { assertItemIdentity } from './item-identity.js';
import { validateSpider, readSpiderData } from './load.js';
import { MODULE_EXTENSIONS, loadSpiderModule, type LoadedSpiderModule } from './module.js';
import type { Spider } from './schema.js';

/** A spider as a command loads it: its settings, and for a code spider its module. */
export interface SpiderDefinitionFile {
  spider: Spider;
  /** present when the module exports hooks: the crawl records its path and hash */
  module?: LoadedSpiderModule;
}

/**
 * Loads and validates a spider file: JSON, YAML, or a TypeScript or JavaScript module. A module
 * that exports only settings is a spider like a JSON one (workers never need its file); one with
 * hooks is a code spider.
 */
export async function loadSpiderDefinition(file: string): Promise<SpiderDefinitionFile> {
  const definition = await readSpiderDefinition(file);
  // Checks of what the settings mean, made when a spider is given (validate, seed, crawl, shell), not
  // when a worker reads a registered crawl back: a crawl that is already running keeps running.
  assertItemIdentity(definition.spider, file);
  return definition;
}

async function readSpiderDefinition(file: string): Promise<SpiderDefinitionFile> {
  const path = resolve(file);
  if (MODULE_EXTENSIONS.has(extname(path).toLowerCase())) {
    const loaded = await loadSpiderModule(file);
    return hasCode(loaded.code) ? { spider: loaded.spider, module: loaded } : { spider: loaded.spider };
  }
  return { spider: validateSpider(await readSpiderData(path), file) };
}

/** Loads and validates a spider file's settings (JSON, YAML or a module). */
export async function loadSpiderFile(file: string): Promise<Spider> {
  return (await loadSpiderDefinition(file)).spider;
}
