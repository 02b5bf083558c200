import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_SOCKET_PATH, PROFILE_ENV, chromiumEnvironment, scratchBase, isAbandoned, isSandboxFailure, launcherScript, sandboxPlan, shellQuote } from '@crawlfleet/render';

// The pure parts of how a renderer launches Chromium (issue 28, items 14, 18 and 19).

describe("Chromium's launcher script", () => {
  test('quotes any path for the shell: spaces, quotes, dollars and backquotes stay literal', () => {
    for (const value of ['/usr/bin/chromium', "/opt/it's here/chrome", '/x/$(touch /tmp/no)/`id`/"q"']) {
      expect(execFileSync('/bin/sh', ['-c', `printf %s ${shellQuote(value)}`], { encoding: 'utf8' })).toBe(value);
    }
  });

  test('runs the browser under setpriv --pdeathsig KILL when there is one, else the browser itself', () => {
    expect(launcherScript('/usr/bin/chromium', '/usr/bin/setpriv')).toMatch(/\nexec '\/usr\/bin\/setpriv' --pdeathsig KILL -- '\/usr\/bin\/chromium' "\$@"\n$/);
    expect(launcherScript('/usr/bin/chromium', undefined)).toMatch(/\nexec '\/usr\/bin\/chromium' "\$@"\n$/);
  });

  test("passes every argument on, with playwright-core's profile (removed, it is empty) swapped for the renderer's own", () => {
    const dir = mkdtempSync(join(tmpdir(), 'launcher-'));
    const script = join(dir, 'launch.sh');
    writeFileSync(script, launcherScript('/usr/bin/printf', undefined).replace(`'/usr/bin/printf' "$@"`, `'/usr/bin/printf' '%s\\n' "$@"`), { mode: 0o700 });
    const theirs = join(dir, 'playwright_chromiumdev_profile-x');
    mkdirSync(theirs);
    const args = ['--headless', `--user-data-dir=${theirs}`, 'a b', "it's", '--remote-debugging-pipe'];
    const out = execFileSync(script, args, { encoding: 'utf8', env: { PATH: '/usr/bin:/bin', [PROFILE_ENV]: join(dir, 'own profile') } });
    expect(out.split('\n').slice(0, -1)).toEqual(['--headless', `--user-data-dir=${join(dir, 'own profile')}`, 'a b', "it's", '--remote-debugging-pipe']);
    expect(existsSync(theirs)).toBe(false);
    // Without the variable, the arguments stay as they came.
    expect(
      execFileSync(script, args, { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } })
        .split('\n')
        .slice(0, -1),
    ).toEqual(args);
  });
});

describe("a dead renderer's directory", () => {
  const mine = { isDirectory: true, uid: 1000, myUid: 1000, ageMs: 5_000 };
  test.each([
    ['its owner socket refuses: the renderer is gone', { ...mine, owner: 'refused' }, true],
    ['its owner listens: alive', { ...mine, owner: 'listening' }, false],
    ['the probe could not tell (a timeout, a full backlog)', { ...mine, owner: 'unknown' }, false],
    ['no socket, a minute old: a start that died before it listened', { ...mine, owner: 'absent', ageMs: 61_000 }, true],
    ['no socket, just made: a start under way', { ...mine, owner: 'absent' }, false],
    ["another user's", { ...mine, uid: 0, owner: 'refused' }, false],
    ['not a directory (a symlink, a file)', { ...mine, isDirectory: false, owner: 'refused' }, false],
  ] as const)('%s', (_, facts, abandoned) => {
    expect(isAbandoned(facts)).toBe(abandoned);
  });
});

describe("Chromium's environment and sandbox", () => {
  test("Chromium gets only the allow-listed variables (paths, locale, fonts, time zone), none of the fleet's secrets, and what the pool sets", () => {
    const env = {
      PATH: '/usr/bin:/bin',
      HOME: '/home/node',
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      TZ: 'UTC',
      FONTCONFIG_PATH: '/etc/fonts',
      XDG_CACHE_HOME: '/tmp/cache',
      TMPDIR: '/tmp',
      REDIS_URL: 'redis://:pw@redis:6379',
      MONGO_URL: 'mongodb://u:pw@mongo/x',
      PROXY_LIST: 'http://u:pw@proxy:8080',
      DASHBOARD_PASSWORD: 'pw',
      AWS_SECRET_ACCESS_KEY: 'k',
      NODE_OPTIONS: '--require /x.js',
      LD_PRELOAD: '/x.so',
      UNSET: undefined,
    };
    expect(chromiumEnvironment(env, { TMPDIR: '/tmp/crawlfleet-render-x/tmp' })).toEqual({
      PATH: '/usr/bin:/bin',
      HOME: '/home/node',
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      TZ: 'UTC',
      FONTCONFIG_PATH: '/etc/fonts',
      XDG_CACHE_HOME: '/tmp/cache',
      TMPDIR: '/tmp/crawlfleet-render-x/tmp',
    });
  });

  test.each([
    ['auto, as root: without, and why', 'auto', 0, { sandbox: false, required: false }],
    ['auto, as a user: with (falling back if the platform refuses)', 'auto', 1000, { sandbox: true, required: false }],
    ['on, as a user: with, and a refusal is an error', 'on', 1000, { sandbox: true, required: true }],
    ['on, as root: with (Chromium will refuse: an error, not a silent fallback)', 'on', 0, { sandbox: true, required: true }],
    ['off: without', 'off', 1000, { sandbox: false, required: false }],
  ] as const)('sandbox %s', (_, setting, uid, plan) => {
    const planned = sandboxPlan(setting, uid);
    expect({ sandbox: planned.sandbox, required: planned.required }).toEqual(plan);
    expect(planned.reason !== undefined).toBe(!planned.sandbox);
  });

  test("a launch that failed for the sandbox is told apart from other failures, by playwright-core's message or Chromium's", () => {
    expect(isSandboxFailure('browserType.launch: Chromium sandboxing failed!\n====')).toBe(true);
    expect(isSandboxFailure('[FATAL:zygote_host_impl_linux.cc(127)] No usable sandbox! ...')).toBe(true);
    expect(isSandboxFailure('Running as root without --no-sandbox is not supported. See https://crbug.com/638180.')).toBe(true);
    expect(isSandboxFailure('Failed to launch the browser process: spawn /usr/bin/chromium ENOENT')).toBe(false);
  });
});

describe("where a renderer's directory goes", () => {
  test("under TMPDIR while Chromium's socket path fits there, else under /tmp", () => {
    expect(scratchBase('/tmp')).toBe('/tmp');
    expect(scratchBase('/var/tmp/renderer')).toBe('/var/tmp/renderer');
    // <base>/crawlfleet-render-XXXXXX/tmp/org.chromium.Chromium.XXXXXX/SingletonSocket is 74 bytes past the base
    const fits = `/${'d'.repeat(MAX_SOCKET_PATH - 74 - 1)}`;
    expect(scratchBase(fits)).toBe(fits);
    expect(scratchBase(`${fits}x`)).toBe('/tmp');
    expect(scratchBase('/tmp/crawlfleet-fuzz-TJIhPk/seed-309/tmp')).toBe('/tmp');
  });
});
