// Jest's node environment, which with CRAWLFLEET_CPU_LOG=FILE appends one line per test file: the
// CPU its jest worker and the child processes it reaped used from the file's setup to its teardown
// (/proc/self/stat: utime + stime + cutime + cstime, clock ticks), after the file's own hooks, so
// that what they stop counts. A daemonized server or a container is not counted.
// `node scripts/cpu-report.mjs FILE` prints the files, dearest first.
const { appendFileSync, readFileSync } = require('node:fs');
const { TestEnvironment } = require('jest-environment-node');

const cpuTicks = () =>
  readFileSync('/proc/self/stat', 'utf8')
    .split(') ')[1]
    .split(' ')
    .slice(11, 15)
    .reduce((sum, field) => sum + Number(field), 0);

class CpuLoggingEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = context.testPath;
  }
  async setup() {
    this.started = { ticks: cpuTicks(), at: Date.now() };
    await super.setup();
  }
  async teardown() {
    await super.teardown();
    const log = process.env.CRAWLFLEET_CPU_LOG;
    if (log) appendFileSync(log, `${cpuTicks() - this.started.ticks} ${Date.now() - this.started.at} ${this.testPath}\n`);
  }
}
module.exports = CpuLoggingEnvironment;
