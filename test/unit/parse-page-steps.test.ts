import { capLinks } from '../../services/parser/src/parse-page.js';

// The pure step of a page's parse (services/parser/src/parse-page.ts): limits.maxLinksPerPage.
describe('capLinks', () => {
  const links = ['a', 'b', 'c'].map((u) => ({ url: `http://x/${u}`, depth: 1 }));
  test('keeps every link up to the limit, the same array', () => {
    const capped = capLinks(links, 3);
    expect(capped.links).toBe(links);
    expect(capped.overflow).toBe(0);
    expect(capLinks(links, 10)).toEqual({ links, overflow: 0 });
  });
  test('keeps the first links past it, and counts the rest', () => {
    expect(capLinks(links, 2)).toEqual({ links: links.slice(0, 2), overflow: 1 });
    expect(capLinks(links, 0)).toEqual({ links: [], overflow: 3 });
  });
  test('no links', () => {
    expect(capLinks([], 5)).toEqual({ links: [], overflow: 0 });
  });
});
