import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { scanWarc } from './dist/index.js';
const src = readFileSync(process.argv[2]);
const dir = mkdtempSync(join(tmpdir(), 'torn-'));
const full = await scanWarc(process.argv[2], 0, 300000);
const last = full.records.at(-1); // a whole record inside the first 300 KB
const start = last.offset, len = last.length;
let hangs = 0, tried = 0;
for (let cut = 1; cut < len; cut += Math.max(1, Math.floor(len / 400))) {
  const f = join(dir, `t.warc.gz`);
  writeFileSync(f, src.subarray(0, start + cut));
  tried++;
  const r = await Promise.race([scanWarc(f, 0, start + cut), new Promise((res) => setTimeout(() => res('TIMEOUT'), 2000))]);
  if (r === 'TIMEOUT') { hangs++; if (hangs < 5) console.log('HANG at cut', cut, 'of', len); }
  else if (r.complete !== start) console.log('complete', r.complete, 'expected', start, 'cut', cut);
}
console.log(`tried ${tried}, hangs ${hangs}`);
process.exit(0);
