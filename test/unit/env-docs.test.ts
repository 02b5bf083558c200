import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENV_TABLE, envTableMarkdown, loadEnv } from '@crawlfleet/core';

const ROOT = join(import.meta.dirname, '..', '..');

test("the README's configuration table is the one generated from packages/core/src/env.ts (bin/crawlfleet env)", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const table = /<!-- env-table:start -->\n([\s\S]*?)\n<!-- env-table:end -->/.exec(readme)?.[1];
  expect(table).toBe(envTableMarkdown());
});

test('every variable loadEnv reads is in the table, with the default it really applies', () => {
  const env = loadEnv({});
  expect(env.frontierWindow).toBe(Number(ENV_TABLE.FRONTIER_WINDOW.default));
  expect(env.writeBatchSize).toBe(Number(ENV_TABLE.WRITE_BATCH_SIZE.default));
  expect(env.queuePrefix).toBe(ENV_TABLE.QUEUE_PREFIX.default);
  // Every variable named in the code's env reads is documented.
  const sources = ['packages/core/src/env.ts', 'packages/core/src/spider/module.ts'].map((f) => readFileSync(join(ROOT, f), 'utf8')).join('\n');
  const read = new Set([...sources.matchAll(/process\.env\.([A-Z_]+)/g)].map((m) => m[1]!));
  expect([...read].filter((name) => !(name in ENV_TABLE))).toEqual([]);
});
