import { summarizeReasons } from '../../services/cli/src/commands/dead-letters.js';

test("a crawl's closing line names its commonest failure reasons, most frequent first", () => {
  const entries = [
    ...Array.from({ length: 790 }, () => ({ code: 'ERR_HTTP_STATUS', reason: 'HTTP 404' })),
    ...Array.from({ length: 3 }, () => ({ code: 'ERR_TIMEOUT', reason: 'ERR_TIMEOUT: timed out after 30000 ms' })),
    { code: 'ERR_HTTP_STATUS', reason: 'HTTP 500' },
    { code: 'ERR_STALLED', reason: '' },
    { code: 'ERR_BLOCKED', reason: `blocked: ${'x'.repeat(100)}` },
  ];
  // Equal counts in alphabetical order; a long reason cut at 60 characters.
  const blocked = `blocked: ${'x'.repeat(48)}...`;
  expect(summarizeReasons(entries)).toBe(`HTTP 404 ×790, timed out after 30000 ms ×3, ${blocked} ×1 and 2 other reasons`);
  expect(summarizeReasons(entries, 10)).toBe(`HTTP 404 ×790, timed out after 30000 ms ×3, ${blocked} ×1, ERR_STALLED ×1, HTTP 500 ×1`);
  expect(summarizeReasons(entries.slice(0, 793), 1)).toBe('HTTP 404 ×790 and 1 other reason');
});
