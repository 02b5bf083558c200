import { realpathSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, relative, sep } from 'node:path';
import { spiderSchema } from '@crawlfleet/core';
import { EXIT, ExitError } from '../exit-codes.js';
import { DEMO_START_URL, jsonTemplate, starterSettings, tsTemplate, yamlTemplate, type StarterSettings } from '../init-templates.js';
import { REPO_ROOT, SPIDER_SCHEMA_FILE } from '../repo-root.js';

import { INIT_FORMATS } from '../arguments.js';

export { INIT_FORMATS };
export type InitFormat = (typeof INIT_FORMATS)[number];

export interface InitOptions {
  format?: InitFormat;
  url?: string;
  force?: boolean;
}

/**
 * How a spider file in `dir` names schemas/spider.schema.json: a relative path inside the repository
 * (it moves with a clone), an absolute path outside it.
 */
export function schemaRefFor(dir: string): string {
  const inRepo = relative(REPO_ROOT, dir);
  if (inRepo.startsWith('..') || isAbsolute(inRepo)) return SPIDER_SCHEMA_FILE;
  return relative(dir, SPIDER_SCHEMA_FILE).split(sep).join('/');
}

function checkName(name: string): void {
  const result = spiderSchema.shape.name.safeParse(name);
  if (!result.success) throw new ExitError(EXIT.usage, `init: ${JSON.stringify(name)} is not a spider name: ${result.error.issues[0]?.message ?? 'invalid'}`);
}

function checkUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ExitError(EXIT.usage, `init: --url: not a URL: ${JSON.stringify(value)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ExitError(EXIT.usage, `init: --url: only http and https URLs are crawled, got ${url.protocol}`);
  return url.href;
}

/** What the JSON file cannot say in comments. */
function jsonNotes(s: StarterSettings, file: string, schemaRef: string): string[] {
  return [
    `${file} (JSON has no comments, so here is what it holds):`,
    `  $schema                points at the spider format's JSON Schema (${schemaRef}), for completion and checks in editors`,
    `  startUrls              where the crawl starts: ${s.startUrl}`,
    `  allowedDomains         links are followed on ${s.domain} only`,
    '  maxPages               a safety net: no new URL after 5000 pages; raise it or remove it',
    "  obeyRobotsTxt          each host's /robots.txt is fetched first and obeyed",
    s.loopback
      ? `  allowPrivateAddresses  true only because ${s.domain} is on loopback (the demo site); the SSRF guard refuses private addresses otherwise. Keep it false for sites on the internet`
      : '  allowPrivateAddresses  false: the SSRF guard refuses loopback, private and link-local addresses. Set it (or allowedAddresses) only for a site on your own network',
    '  follow                 the catalogue\'s "next" link and every book page',
    '  items                  a `listing` item per book on a catalogue page (`each`), a `book` item per book page (`match`);',
    '                         `key` identifies an item, `regex` keeps its first group, `type` converts, `required` drops items without it',
    `  (the same spider with a comment on every section: crawlfleet init ${s.name} --format yaml)`,
  ];
}

/** `crawlfleet init NAME [--format json|yaml|ts] [--url URL] [--force]`: writes NAME.<ext> in the current folder. */
export async function initCommand(name: string, options: InitOptions): Promise<number> {
  checkName(name);
  const format = options.format ?? 'json';
  const settings = starterSettings(name, checkUrl(options.url ?? DEMO_START_URL));
  const dir = realpathSync(process.cwd());
  const file = `${name}.${format}`;
  const path = join(dir, file);
  const schemaRef = schemaRefFor(dir);
  const text = format === 'json' ? jsonTemplate(settings, schemaRef) : format === 'yaml' ? yamlTemplate(settings, schemaRef, file) : tsTemplate(settings, file);
  try {
    writeFileSync(path, text, { flag: options.force ? 'w' : 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new ExitError(EXIT.usage, `init: ${path} already exists; pass --force to overwrite it`);
    throw new ExitError(EXIT.failure, `init: cannot write ${path}: ${(err as Error).message}`);
  }
  process.stdout.write(`${path}\n`);
  const notes = format === 'json' ? ['', ...jsonNotes(settings, file, schemaRef)] : [];
  const next = [
    '',
    `next: crawlfleet validate ${file}`,
    `      crawlfleet shell ${settings.startUrl} --spider ${file}`,
    `      crawlfleet crawl ${file}`,
    ...(format === 'ts' ? ['(a code spider needs the @crawlfleet/sdk package)'] : []),
  ];
  process.stderr.write(`wrote ${file}\n${[...notes, ...next].join('\n')}\n`);
  return EXIT.ok;
}
