// Jest's node environment, which with CRAWLFLEET_CPU_LOG=FILE appends one line per test file: the
// CPU its jest worker and the child processes it reaped used from the file's setup to its teardown
// (/proc/self/stat: utime + stime + cutime + cstime, clock ticks), after the file's own hooks, so
// that what they stop counts. A daemonized server or a container is not counted, and a child
// killed but not yet reaped at teardown counts to the worker's next file. The log is appended to:
// start each run with a new one.
// `node scripts/cpu-report.mjs FILE` prints the files, dearest first.
const { appendFileSync, readFileSync } = require('node:fs');
const { TestEnvironment } = require('jest-environment-node');

const log = process.env.CRAWLFLEET_CPU_LOG;

/** utime + stime + cutime + cstime, fields 14 to 17, after the command name's closing parenthesis */
function cpuTicks() {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  return stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .slice(11, 15)
    .reduce((sum, field) => sum + Number(field), 0);
}

class CpuLoggingEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = context.testPath;
  }
  async setup() {
    if (log) this.started = { ticks: cpuTicks(), at: Date.now() };
    await super.setup();
  }
  async teardown() {
    await super.teardown();
    if (log) appendFileSync(log, `${cpuTicks() - this.started.ticks} ${Date.now() - this.started.at} ${this.testPath}\n`);
  }
}
module.exports = CpuLoggingEnvironment;
