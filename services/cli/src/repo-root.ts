import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The repository root: this file is services/cli/src/repo-root.ts, built to services/cli/dist/repo-root.js. */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** schemas/spider.schema.json, written by `npm run schema`. */
export const SPIDER_SCHEMA_FILE = fileURLToPath(new URL('../../../schemas/spider.schema.json', import.meta.url));

/** The root package.json's version, read when asked (so a release bumps one file). */
export function rootVersion(): string {
  return (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}
