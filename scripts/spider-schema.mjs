#!/usr/bin/env node
// Writes schemas/spider.schema.json from the zod spider schema (packages/core/src/spider/json-schema.ts).
// Run by `npm run schema` after `npm run build`; test/unit/spider-json-schema.test.ts fails when the
// committed file differs from what this writes, so a change to the spider schema comes with it.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spiderJsonSchema } from '@crawlfleet/core';

const out = join(dirname(fileURLToPath(import.meta.url)), '..', 'schemas', 'spider.schema.json');
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(spiderJsonSchema(), null, 2)}\n`);
process.stderr.write(`wrote ${out}\n`);
