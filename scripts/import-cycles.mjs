#!/usr/bin/env node
// Import circles in the product's TypeScript (packages/*/src, services/*/src): between packages
// (`@crawlfleet/<name>`) and between the files of one package (relative imports). Type-only imports
// count: a circle of types is still a circle a reader has to hold in mind. Prints each circle and
// exits 1 when there is one: `node scripts/import-cycles.mjs`.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const root = join(import.meta.dirname, '..');

function* sourceFiles(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sourceFiles(path);
    else if (/\.(ts|tsx|mts|cts|js|mjs|cjs)$/.test(name) && !/\.d\.[cm]?ts$/.test(name)) yield path;
  }
}

/**
 * Every module specifier a file reads: imports and re-exports, dynamic `import()`, type queries
 * (`import('./x.js').T`), `import x = require()` and `require()`.
 */
function specifiersOf(path) {
  const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, false);
  const found = [];
  const literal = (node) => (node && ts.isStringLiteralLike(node) ? found.push(node.text) : undefined);
  const visit = (node) => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) literal(node.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) literal(node.moduleReference.expression);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) literal(node.argument.literal);
    else if (ts.isCallExpression(node) && (node.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(node.expression) && node.expression.text === 'require')))
      literal(node.arguments[0]);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The workspaces: `@crawlfleet/<name>` for each package.json under packages/ and services/. */
export function workspaces() {
  const all = [];
  for (const group of ['packages', 'services']) {
    for (const name of readdirSync(join(root, group))) {
      const manifest = join(root, group, name, 'package.json');
      if (!existsSync(manifest) || !existsSync(join(root, group, name, 'src'))) continue;
      all.push({ name: JSON.parse(readFileSync(manifest, 'utf8')).name, dir: join(root, group, name) });
    }
  }
  return all;
}

/** Pure: the circles of a directed graph (its strongly connected components of more than one node, or a node on itself). */
export function circlesOf(graph) {
  let index = 0;
  const indexOf = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const circles = [];
  const visit = (node) => {
    indexOf.set(node, index);
    low.set(node, index);
    index++;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!indexOf.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node), low.get(next)));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node), indexOf.get(next)));
    }
    if (low.get(node) !== indexOf.get(node)) return;
    const component = [];
    let member;
    do {
      member = stack.pop();
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1 || (graph.get(node) ?? new Set()).has(node)) circles.push(component.sort());
  };
  for (const node of [...graph.keys()].sort()) if (!indexOf.has(node)) visit(node);
  return circles;
}

/** The source file a relative specifier names: `./x.js` is `./x.ts` when that is the file. */
function sourceOf(target) {
  for (const [from, to] of [
    ['.js', '.ts'],
    ['.mjs', '.mts'],
    ['.cjs', '.cts'],
    ['.js', '.tsx'],
  ]) {
    if (target.endsWith(from) && existsSync(target.slice(0, -from.length) + to)) return target.slice(0, -from.length) + to;
  }
  return target;
}

/** The two graphs: packages by their imports of each other, and each package's files by their relative imports. */
export function importGraphs() {
  const packages = new Map();
  const files = new Map();
  const names = workspaces();
  for (const { name, dir } of names) {
    const deps = new Set();
    packages.set(name, deps);
    for (const path of sourceFiles(join(dir, 'src'))) {
      const from = relative(root, path);
      const edges = new Set();
      files.set(from, edges);
      for (const spec of specifiersOf(path)) {
        const pkg = names.find((w) => spec === w.name || spec.startsWith(`${w.name}/`));
        if (pkg && pkg.name !== name) deps.add(pkg.name);
        if (spec.startsWith('.')) edges.add(relative(root, sourceOf(resolve(dirname(path), spec))));
      }
    }
  }
  return { packages, files };
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const { packages, files } = importGraphs();
  const circles = [...circlesOf(packages).map((c) => `packages: ${c.join(' ⇄ ')}`), ...circlesOf(files).map((c) => `files: ${c.join(' ⇄ ')}`)];
  for (const line of circles) console.log(line);
  console.log(circles.length === 0 ? `no import circle among ${packages.size} packages and ${files.size} files` : `${circles.length} import circle(s)`);
  process.exitCode = circles.length === 0 ? 0 : 1;
}
