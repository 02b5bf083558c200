import { execFileSync } from 'node:child_process';
import { launcherScript, shellQuote } from '@crawlfleet/render';

// The pure parts of how a renderer launches Chromium (issue 28, items 14, 18 and 19).

describe("Chromium's launcher script", () => {
  test('quotes any path for the shell: spaces, quotes, dollars and backquotes stay literal', () => {
    for (const value of ['/usr/bin/chromium', "/opt/it's here/chrome", '/x/$(touch /tmp/no)/`id`/"q"']) {
      expect(execFileSync('/bin/sh', ['-c', `printf %s ${shellQuote(value)}`], { encoding: 'utf8' })).toBe(value);
    }
  });

  test('runs the browser under setpriv --pdeathsig KILL when there is one, else the browser itself, with every argument passed on', () => {
    expect(launcherScript('/usr/bin/chromium', '/usr/bin/setpriv')).toBe(`#!/bin/sh\nexec '/usr/bin/setpriv' --pdeathsig KILL -- '/usr/bin/chromium' "$@"\n`);
    expect(launcherScript('/usr/bin/chromium', undefined)).toBe(`#!/bin/sh\nexec '/usr/bin/chromium' "$@"\n`);
  });
});
