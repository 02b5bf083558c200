import { parseJsonPath, type JsonPathStep } from '@crawlfleet/core';

/**
 * The spider format's JSON paths, compiled once and evaluated against parsed JSON. Pure and small:
 * keys, indexes, `[*]` and quoted keys, relative to a scope (`$` is the scope itself). The syntax is
 * parsed by @crawlfleet/core (the spider schema validates paths with the same parser).
 */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export interface JsonPath {
  source: string;
  steps: readonly JsonPathStep[];
}

export { JsonPathSyntaxError, parseJsonPath, type JsonPathStep } from '@crawlfleet/core';

/** Pure: a path compiled to its steps; throws JsonPathSyntaxError on a bad path. */
export function compileJsonPath(source: string): JsonPath {
  return { source, steps: parseJsonPath(source) };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function walk(value: unknown, steps: readonly JsonPathStep[], at: number, out: unknown[]): void {
  if (at === steps.length) {
    out.push(value);
    return;
  }
  const step = steps[at]!;
  switch (step.kind) {
    case 'key':
      if (isObject(value) && Object.hasOwn(value, step.key)) walk(value[step.key], steps, at + 1, out);
      return;
    case 'index':
      if (Array.isArray(value) && step.index < value.length) walk(value[step.index], steps, at + 1, out);
      return;
    case 'wildcard':
      if (Array.isArray(value)) for (const element of value) walk(element, steps, at + 1, out);
      else if (isObject(value)) for (const key of Object.keys(value)) walk(value[key], steps, at + 1, out);
      return;
  }
}

/**
 * Pure: every value the path selects from `scope`, in document order; wildcards flatten into one
 * list. A key or index that is not there selects nothing; a `null` that is there is selected.
 */
export function evaluateJsonPath(path: JsonPath | string, scope: unknown): unknown[] {
  const compiled = typeof path === 'string' ? compileJsonPath(path) : path;
  const out: unknown[] = [];
  walk(scope, compiled.steps, 0, out);
  return out;
}

/** Pure: the first value the path selects, or undefined when it selects nothing. */
export function firstJsonMatch(path: JsonPath | string, scope: unknown): unknown {
  return evaluateJsonPath(path, scope)[0];
}
