import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { ConfigError } from '../errors.js';
import { spiderSchema, type Spider } from './schema.js';

/** `items[0].fields.price.regex`: the path inside the file, as a user reads it. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out === '' ? '(top level)' : out;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') return `unknown key(s) ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
  return issue.message;
}

/** Validates a spider object; a failure names the file, the path inside it and the problem. */
export function validateSpider(value: unknown, file = 'spider'): Spider {
  const result = spiderSchema.safeParse(value);
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => `${file}: ${formatPath(issue.path)}: ${describeIssue(issue)}`);
  throw new ConfigError(`invalid spider:\n  ${issues.join('\n  ')}`, { file, issues });
}

/** Reads a JSON or YAML spider file. */
export async function readSpiderData(path: string): Promise<unknown> {
  const ext = extname(path).toLowerCase();
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`${path}: cannot read spider file: ${(err as Error).message}`, { file: path, cause: err });
  }
  try {
    if (ext === '.yaml' || ext === '.yml') return parseYaml(text) as unknown;
    if (ext === '.json' || ext === '') return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ConfigError(`${path}: not valid ${ext === '.json' ? 'JSON' : 'YAML'}: ${(err as Error).message}`, { file: path, cause: err });
  }
  throw new ConfigError(`${path}: unsupported spider file type "${ext}" (use .json, .yaml, .yml, or a module: .ts, .mts, .js, .mjs)`, { file: path });
}
