import { functionsOf, productFunctions } from '../../scripts/long-functions.mjs';

// STYLE: no function of the product (packages/*/src, services/*/src; Lua and tests aside) is longer
// than 60 lines, so that each reads as its steps (issue #29). `npm run long-functions` lists the longest.
const LIMIT = 60;

describe('function length (scripts/long-functions.mjs)', () => {
  it('measures every function from its first line to its last, a nested one on its own and in its parent', () => {
    const text = ['export function outer() {', '  const inner = () => {', '    return 1;', '  };', '  return inner();', '}', 'class C {', '  m() {', '    return 2;', '  }', '}'].join('\n');
    expect(functionsOf(text, 'x.ts').map((f) => [f.name, f.lines, f.where])).toEqual([
      ['outer', 6, 'x.ts:1'],
      ['inner', 3, 'x.ts:2'],
      ['m', 3, 'x.ts:8'],
    ]);
  });

  it(`no function of packages/ and services/ is longer than ${LIMIT} lines`, () => {
    const found = productFunctions();
    expect(found.length).toBeGreaterThan(500);
    expect(found.filter((f) => f.lines > LIMIT).map((f) => `${f.lines} ${f.name} ${f.where}`)).toEqual([]);
  });
});
