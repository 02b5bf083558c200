// Prints the CPU each jest test file used, dearest first, from the log that
// test/helpers/cpu-environment.cjs writes (CRAWLFLEET_CPU_LOG): its jest worker and the child
// processes it reaped, from the file's setup to its teardown.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const ticksPerSecond = 100;
const files = readFileSync(process.argv[2], 'utf8')
  .trim()
  .split('\n')
  .filter((line) => line !== '')
  .map((line) => {
    const [ticks, ms, ...path] = line.split(' ');
    return { cpu: Number(ticks) / ticksPerSecond, wall: Number(ms) / 1000, file: relative(process.cwd(), path.join(' ')) };
  })
  .sort((a, b) => b.cpu - a.cpu);
const sum = (key) => files.reduce((total, file) => total + file[key], 0);
console.log(`${files.length} files: ${sum('cpu').toFixed(0)} CPU s in ${sum('wall').toFixed(0)} s of their own wall time`);
for (const { cpu, wall, file } of files) console.log(`${cpu.toFixed(1).padStart(7)} CPU s ${wall.toFixed(1).padStart(7)} s  ${file}`);
