import { circlesOf, importGraphs } from '../../scripts/import-cycles.mjs';

const graph = (edges: Record<string, string[]>) => new Map(Object.entries(edges).map(([node, to]) => [node, new Set(to)]));

describe('imports run one way (scripts/import-cycles.mjs)', () => {
  it('finds every circle of a graph, and none in a graph without one', () => {
    expect(circlesOf(graph({ a: ['b'], b: ['c'], c: [] }))).toEqual([]);
    // gc → status → registry → gc, as packages/crawl had it, beside a file importing itself
    expect(circlesOf(graph({ gc: ['status'], status: ['registry'], registry: ['gc', 'layout'], layout: [], self: ['self'] }))).toEqual([['gc', 'registry', 'status'], ['self']]);
  });

  it('between the packages and services, and between the files of each, no import runs back', () => {
    const { packages, files } = importGraphs();
    expect(packages.size).toBeGreaterThan(10);
    expect(files.size).toBeGreaterThan(100);
    expect(circlesOf(packages)).toEqual([]);
    expect(circlesOf(files)).toEqual([]);
  });
});
