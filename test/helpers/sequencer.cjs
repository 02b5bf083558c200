// Jest runs the longest test files first, so that no worker is left with a long one at the end; it
// knows their times from its cache of the last run on this machine. A fresh clone has no such
// cache: test/durations.json (seconds per file, from a CI run) stands in for it. A file in neither
// runs first, as jest does with files it has not timed.
const { default: Sequencer } = require('@jest/test-sequencer');
const { relative } = require('node:path');
const durations = require('../durations.json');

class LongestFirst extends Sequencer {
  time(test) {
    const cached = super.time(test);
    if (cached !== undefined) return cached;
    const seconds = durations[relative(test.context.config.rootDir, test.path)];
    return seconds === undefined ? undefined : seconds * 1000;
  }
}
module.exports = LongestFirst;
