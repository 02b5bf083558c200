import { writtenResult } from '../../services/writer/src/write-page.js';

// What a stored write job records (services/writer/src/write-page.ts).
describe('writtenResult', () => {
  test('items written, nothing archived', () => {
    expect(writtenResult({ items: [{ type: 'a' }, { type: 'b' }] }, 'fp', undefined)).toEqual({ counters: { written: 2 } });
  });
  test('items written and the capture archived', () => {
    expect(writtenResult({ items: [{ type: 'a' }] }, 'fp', 'http://x/')).toEqual({ counters: { written: 1, archived: 1 }, archivedUri: 'http://x/' });
  });
  test('a page without items leaves its URL where its fetch or parse left it', () => {
    expect(writtenResult({ items: [] }, 'fp', 'http://x/')).toEqual({ counters: { written: 0, archived: 1 }, archivedUri: 'http://x/', url: { fingerprint: 'fp', state: 'd' } });
    expect(writtenResult({ items: [] }, 'fp', undefined)).toEqual({ counters: { written: 0 }, url: { fingerprint: 'fp', state: 'd' } });
  });
});
