#!/usr/bin/env node
// The longest functions of the product's TypeScript (packages/*/src, services/*/src; Lua and tests
// aside), by lines from their first to their last: `node scripts/long-functions.mjs [count] [--over N]`.
// With --over N it exits 1 when any is longer than N lines (STYLE.md sets 60). A function inside
// another is counted on its own, and its lines count in its parent's too.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const root = join(import.meta.dirname, '..');

function* sourceFiles(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sourceFiles(path);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) yield path;
  }
}

function nameOf(node, source) {
  if (node.name) return node.name.getText(source);
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (parent && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))) return parent.name.getText(source);
  if (parent && ts.isCallExpression(parent)) return `(callback of ${parent.expression.getText(source).slice(0, 40)})`;
  return '(anonymous)';
}

/** Every function with a body in one file's text: its lines from first to last, its name, and where. */
export function functionsOf(text, where) {
  const source = ts.createSourceFile(where, text, ts.ScriptTarget.Latest, true);
  const found = [];
  const visit = (node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ lines: last - first + 1, where: `${where}:${first + 1}`, name: nameOf(node, source) });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The product's functions (packages/*\/src, services/*\/src), longest first. */
export function productFunctions() {
  const found = [];
  for (const top of ['packages', 'services']) {
    for (const unit of readdirSync(join(root, top))) {
      const src = join(root, top, unit, 'src');
      if (!statSync(src, { throwIfNoEntry: false })?.isDirectory()) continue;
      for (const file of sourceFiles(src)) found.push(...functionsOf(readFileSync(file, 'utf8'), relative(root, file)));
    }
  }
  return found.sort((a, b) => b.lines - a.lines);
}

if (process.argv[1] === import.meta.filename) {
  const args = process.argv.slice(2);
  const overAt = args.indexOf('--over');
  const limit = overAt >= 0 ? Number(args[overAt + 1]) : undefined;
  const count = Number(args.find((a, i) => /^\d+$/.test(a) && (overAt < 0 || i !== overAt + 1)) ?? 10);
  const found = productFunctions();
  for (const f of found.slice(0, count)) console.log(`${String(f.lines).padStart(4)}  ${f.name}  ${f.where}`);
  if (limit !== undefined) {
    const over = found.filter((f) => f.lines > limit);
    console.log(`${over.length} of ${found.length} functions are longer than ${limit} lines`);
    process.exit(over.length > 0 ? 1 : 0);
  }
}
