import { z } from 'zod';
import { spiderSchema } from './schema.js';

/** Where the published schema lives; spider files may name it (or a local copy) in `"$schema"`. */
export const SPIDER_SCHEMA_ID = 'https://crawlfleet.dev/schemas/spider.schema.json';

/**
 * The spider file format as a JSON Schema (draft 2020-12), generated from the zod schema that the
 * loader validates with, so editors complete and check what crawlfleet accepts. It describes what a
 * user writes (`io: 'input'`: keys with defaults are optional). Unknown keys are rejected, as the
 * loader rejects them. Checks written in code (a regex must compile, a URL must be http(s), an item's
 * `key` must name one of its fields) cannot be expressed: `crawlfleet validate` runs those.
 * schemas/spider.schema.json is this, written by `npm run schema`; a unit test keeps the two equal.
 */
export function spiderJsonSchema(): Record<string, unknown> {
  const generated = z.toJSONSchema(spiderSchema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  const { $schema, ...rest } = generated;
  return {
    $schema,
    $id: SPIDER_SCHEMA_ID,
    title: 'crawlfleet spider',
    description:
      'A crawlfleet spider file (JSON or YAML): where to start, which links to follow and which items to extract. ' +
      'Checks that need code (regexes compile, URLs are http or https, an item key names one of its fields) are made by `crawlfleet validate`.',
    ...rest,
  };
}
