import { Document, Element, Text, isComment, isDirective, isTag, isText, type ChildNode, type ParentNode } from 'domhandler';
import { foreignContent } from 'parse5';
import { HEAD_CONTENT, RAW_TEXT } from './tree-divergence.js';

/**
 * Fix-ups that turn htmlparser2's tree of a page into the tree parse5 builds of it, for the steps
 * the standard takes on every page (not misnesting, which tree-divergence.ts sends to parse5):
 * - a `<tr>` directly in a `<table>` goes into an implied `<tbody>`;
 * - the content of a raw-text element (`<noscript>` with scripting on, `<iframe>`, ...) is one text
 *   node, the source as written;
 * - a `<template>`'s content sits in a document fragment;
 * - a newline right after `<pre>`, `<listing>` or `<textarea>` is dropped;
 * - SVG element and attribute names take the standard's case (`clipPath`, `viewBox`), `xlink:href`
 *   becomes `href`.
 * Returns why not when the tree is outside what these cover: the document lacks the explicit
 * `<html><head>…</head><body>…</body></html>` frame, the head holds body content, an HTML element
 * breaks out of SVG, or an attribute name would repeat.
 */
export function shapeLikeParse5(doc: Document, source: string): string | undefined {
  if (!hasDocumentFrame(doc)) return 'no <html><head></head><body></body></html> frame';
  return fixChildren(doc, source, false);
}

const isBlank = (node: ChildNode) => isText(node) && /^[\t\n\f\r ]*$/.test(node.data);
const isQuiet = (node: ChildNode) => isComment(node) || isBlank(node);

function hasDocumentFrame(doc: Document): boolean {
  const elements = doc.children.filter((n) => !isQuiet(n) && !isDirective(n));
  const html = elements[0];
  if (elements.length !== 1 || html === undefined || !isTag(html) || html.name !== 'html') return false;
  const parts = html.children.filter((n) => !isQuiet(n));
  const [head, body] = parts;
  if (parts.length !== 2 || head === undefined || body === undefined || !isTag(head) || head.name !== 'head' || !isTag(body) || body.name !== 'body') return false;
  return head.children.every((n) => isQuiet(n) || (isTag(n) && HEAD_CONTENT.has(n.name)));
}

/** The fix-ups, in one walk; why not, when an element is beyond them. */
function fixChildren(parent: ParentNode, source: string, inSvg: boolean): string | undefined {
  if (isTag(parent) && parent.name === 'table') wrapRowsInTbody(parent);
  for (const node of parent.children) {
    if (!isTag(node)) continue;
    const svg = inSvg || node.name === 'svg';
    if (svg) {
      const why = adjustSvgElement(node, inSvg);
      if (why) return why;
    }
    if (RAW_TEXT.has(node.name)) {
      if (!keepSourceAsText(node, source)) return `<${node.name}> not closed by its own end tag`;
      continue;
    }
    if (node.name === 'pre' || node.name === 'listing' || node.name === 'textarea') dropLeadingNewline(node);
    const htmlInside = svg && (node.name === 'foreignObject' || node.name === 'desc' || node.name === 'title');
    const why = fixChildren(node, source, svg && !htmlInside);
    if (why) return why;
    if (node.name === 'template') moveIntoFragment(node);
  }
  return undefined;
}

/** parse5 opens a `<tbody>` for a `<tr>` met directly in a table and keeps it open up to the next table section. */
function wrapRowsInTbody(table: Element): void {
  if (!table.children.some((n) => isTag(n) && n.name === 'tr')) return;
  const children: ChildNode[] = [];
  let tbody: Element | undefined;
  for (const node of table.children) {
    const section = isTag(node) && node.name !== 'tr' && node.name !== 'script' && node.name !== 'style' && node.name !== 'template';
    if (section) tbody = undefined;
    if (!tbody && isTag(node) && node.name === 'tr') {
      tbody = new Element('tbody', {}, []);
      children.push(tbody);
    }
    if (tbody) adopt(tbody, node);
    else children.push(node);
  }
  setChildren(table, children);
}

/** The source between the start and end tags, as one text node; false when it cannot be found. */
function keepSourceAsText(element: Element, source: string): boolean {
  const first = element.children[0];
  const last = element.children[element.children.length - 1];
  if (!first || !last) return true;
  if (first.startIndex === null || last.endIndex === null) return false;
  const closing = source.slice(last.endIndex + 1, last.endIndex + 3 + element.name.length).toLowerCase();
  if (closing !== `</${element.name}`) return false;
  setChildren(element, [new Text(source.slice(first.startIndex, last.endIndex + 1))]);
  return true;
}

function dropLeadingNewline(element: Element): void {
  const first = element.children[0];
  if (first && isText(first) && first.data.startsWith('\n')) first.data = first.data.slice(1);
}

function moveIntoFragment(template: Element): void {
  const content = new Document([]);
  for (const node of [...template.children]) adopt(content, node);
  setChildren(template, [content]);
}

/** Applies parse5's SVG renames; why not, when the element leaves SVG in parse5 or an attribute name repeats. */
function adjustSvgElement(element: Element, inSvg: boolean): string | undefined {
  const token = { tagName: element.name, attrs: Object.entries(element.attribs).map(([name, value]) => ({ name, value })) } as unknown as Parameters<typeof foreignContent.causesExit>[0];
  if (inSvg && foreignContent.causesExit(token)) return `<${element.name}> leaves <svg>`;
  foreignContent.adjustTokenSVGTagName(token);
  foreignContent.adjustTokenSVGAttrs(token);
  foreignContent.adjustTokenXMLAttrs(token);
  const attribs: Record<string, string> = {};
  for (const attr of token.attrs) {
    if (Object.hasOwn(attribs, attr.name)) return `<${element.name}> has ${attr.name} twice in parse5`;
    attribs[attr.name] = attr.value;
  }
  element.name = token.tagName;
  element.attribs = attribs;
  return undefined;
}

function adopt(parent: ParentNode, node: ChildNode): void {
  const siblings = parent.children;
  const prev = siblings[siblings.length - 1] ?? null;
  node.parent = parent;
  node.prev = prev;
  node.next = null;
  if (prev) prev.next = node;
  siblings.push(node);
}

function setChildren(parent: ParentNode, nodes: ChildNode[]): void {
  parent.children = [];
  for (const node of nodes) adopt(parent, node);
}
