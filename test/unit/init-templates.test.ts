import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEMO_START_URL, jsonTemplate, starterSettings, tsTemplate, yamlTemplate } from '../../services/cli/src/init-templates.js';

// The starters `crawlfleet init` writes, byte for byte: test/fixtures/init-templates/golden.json holds
// every template's text for each of these inputs, as the templates wrote them before they were cut
// into named sections (#29). A change to a starter's text updates the golden file on purpose.
const golden = JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures/init-templates/golden.json'), 'utf8')) as Record<string, string>;

const urls = [
  ['books', DEMO_START_URL],
  ['local', 'http://localhost:3000/x'],
  ['six', 'http://[::1]:9000/'],
  ['shop', 'https://example.com/start?a=1'],
  ["o'brien\\x", "https://exa.mple.org/it's/"],
];
const files = ['books.spider.yaml', "spiders/it's\\.ts"];
const refs = ['./crawlfleet.schema.json', 'https://example.com/s.json'];

function everyStarter(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, url] of urls) {
    const s = starterSettings(name!, url!);
    for (const file of files) {
      for (const ref of refs) {
        out[`json ${name} ${url} ${ref}`] = jsonTemplate(s, ref);
        out[`yaml ${name} ${url} ${file} ${ref}`] = yamlTemplate(s, ref, file);
      }
      out[`ts ${name} ${url} ${file}`] = tsTemplate(s, file);
    }
  }
  return out;
}

describe('the init starters', () => {
  const now = everyStarter();
  test('cover the same inputs as the golden file', () => {
    expect(Object.keys(now).sort()).toEqual(Object.keys(golden).sort());
  });
  test.each(Object.keys(golden))('%s', (key) => {
    expect(now[key]).toBe(golden[key]);
  });
});
