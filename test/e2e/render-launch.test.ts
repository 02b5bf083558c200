import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, readdirSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ChromiumScratch } from '@crawlfleet/render';
import { scriptSiteSpider, startScriptSite } from '../fixtures/script-site.mjs';
import { CLI, REDIS_URL, ROOT, dropPrefix, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';

// How a renderer launches Chromium (issue 28, items 14, 18 and 19): what the browser may see of the
// renderer's environment, its sandbox, where its files live, and who can plant what it runs. Each
// test runs real renderer processes (`crawlfleet worker renderer`) against a local script-built
// shop on 127.0.0.1, with TMPDIR pointing at a directory of the test's own.

const CHROMIUM = '/usr/bin/chromium';

/** The pids of `pid`'s descendants (its children, theirs, ...), read from /proc. */
function descendants(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parentOf.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // ended meanwhile
    }
  }
  const found: number[] = [];
  const walk = (p: number) => {
    for (const [child, parent] of parentOf) {
      if (parent === p) {
        found.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return found;
}

/** A process's NUL-separated /proc file as a list ('' once it ended). */
const procList = (pid: number, file: 'environ' | 'cmdline'): string[] => {
  try {
    return readFileSync(`/proc/${pid}/${file}`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
};

/** A process's command line as one string: Chromium's helpers rewrite theirs as one (setproctitle). */
const commandLine = (pid: number) => procList(pid, 'cmdline').join(' ');
const isChromium = (pid: number) => (procList(pid, 'cmdline')[0] ?? '').includes('chromium');
/** The browser process itself: the one Chromium process without a --type. */
const isBrowser = (pid: number) => !commandLine(pid).includes('--type=');

interface Rendering {
  renderer: ChildProcess & { result?: Promise<unknown> };
  /** the renderer's Chromium processes (the browser and its helpers) */
  chromium(): number[];
  /** pages the browser has loaded from the shop */
  rendered(): number;
  stop(): Promise<void>;
  /** what the renderer logged so far */
  log(): string;
}

describe('launching Chromium (issue 28)', () => {
  const prefixes: string[] = [];
  const stops: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const stop of stops) await stop().catch(() => undefined);
    for (const p of prefixes) await dropPrefix(p);
  });

  /**
   * A crawl of the shop with `render: always`, a fetcher, and a renderer started by `startRenderer`
   * (its env given), run until the renderer's Chromium has rendered a page and is still up.
   */
  async function rendering(
    name: string,
    tmp: string,
    rendererEnv: Record<string, string> = {},
    startRenderer = (env: NodeJS.ProcessEnv): ChildProcess => spawnCli(['worker', 'renderer', '--concurrency', '2'], { env }),
  ): Promise<Rendering> {
    const site = await startScriptSite({ products: 40, perPage: 10, apiDelayMs: 200 });
    const prefix = uniquePrefix(name);
    prefixes.push(prefix);
    const env = testEnv(prefix, { TMPDIR: tmp });
    const spider = writeJson(tempDir(name), 'shop.json', { ...scriptSiteSpider(site.url, 'always'), startUrls: [`${site.url}/app/list/1.html`] });
    expect((await runCli(['seed', spider, '--sink', join(tmp, '..', `${name}.jsonl`), '--crawl-id', 'shop'], { env })).code).toBe(0);
    const fetcher = spawnCli(['worker', 'fetcher'], { env });
    const renderer = startRenderer({ ...env, ...rendererEnv });
    const stderr: string[] = [];
    renderer.stderr?.on('data', (d: Buffer) => stderr.push(d.toString()));
    const rendered = () => site.visits.browser.size;
    const chromium = () => descendants(renderer.pid!).filter(isChromium);
    const stop = async () => {
      for (const child of [renderer, fetcher]) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await Promise.all([renderer, fetcher].map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once('close', r)) : undefined)));
      await site.close();
    };
    stops.push(stop);
    await waitFor(() => rendered() >= 1 && chromium().length > 0, 90_000, `a page rendered by ${name}'s renderer (stderr: ${stderr.join('').slice(-2000)})`);
    return { renderer, chromium, rendered, stop, log: () => stderr.join('') };
  }

  test('item 19: a launcher script planted in the shared temp directory by another user is never run; the renderer writes its own, in a directory only it can enter', async () => {
    const base = tempDir('launch-planted');
    // The script renderers used to write, at the path they used to reuse (a hash of its text, under
    // $TMPDIR/crawlfleet-chromium): anyone who can write the temp directory could put one there first.
    const genuine = `#!/bin/sh\nexec /usr/bin/setpriv --pdeathsig KILL -- ${JSON.stringify(CHROMIUM)} "$@"\n`;
    const plantedDir = join(base, 'crawlfleet-chromium');
    const planted = join(plantedDir, `chromium-${createHash('sha1').update(genuine).digest('hex').slice(0, 12)}.sh`);
    const marker = join(base, 'planted-script-ran');
    mkdirSync(plantedDir);
    writeFileSync(planted, `#!/bin/sh\necho planted > ${JSON.stringify(marker)}\nexec ${JSON.stringify(CHROMIUM)} "$@"\n`, { mode: 0o755 });
    // Planted by another user (nobody), as on a shared machine; the renderer's TMPDIR is world-writable.
    chmodSync(base, 0o1777);
    chownSync(plantedDir, 65534, 65534);
    chownSync(planted, 65534, 65534);
    const run = await rendering('launch-planted', base);
    try {
      expect(existsSync(marker)).toBe(false);
      // Chromium runs from the renderer's own directory: made by it for itself (mkdtemp), mode 0700.
      const own = readdirSync(base).filter((n) => n.startsWith('crawlfleet-render-'));
      expect(own).toHaveLength(1);
      const info = statSync(join(base, own[0]!));
      expect([info.uid, info.mode & 0o777]).toEqual([process.getuid!(), 0o700]);
    } finally {
      await run.stop();
    }
  });

  test('item 18: kill -9 of a renderer leaves its Chromium profile and temp files in one directory of its own, which the next renderer on the same temp directory removes; a live one is left alone; a clean stop leaves nothing', async () => {
    const base = tempDir('launch-killed');
    const entries = () => readdirSync(base).sort();
    const first = await rendering('launch-killed-1', base);
    const itsChromium = first.chromium();
    first.renderer.kill('SIGKILL');
    await waitFor(() => itsChromium.every((pid) => !isChromium(pid)), 20_000, "the killed renderer's Chromium to end");
    const left = entries();
    // Another renderer, alive, on the same temp directory (a second container on a shared volume).
    const alive = await ChromiumScratch.create(base, CHROMIUM);
    try {
      const second = await rendering('launch-killed-2', base);
      const aliveName = alive.dir.slice(base.length + 1);
      // Everything the killed renderer left was inside its own directory...
      expect(left.filter((n) => !n.startsWith('crawlfleet-render-'))).toEqual([]);
      // ...which the second one removed when it started: only the live one's and its own remain.
      const now = entries();
      const secondOwn = now.filter((n) => n !== aliveName && !left.includes(n));
      expect(secondOwn).toHaveLength(1);
      expect(now).toEqual([aliveName, secondOwn[0]!].sort());
      await second.stop();
      // A clean stop removes its own directory.
      expect(entries()).toEqual([alive.dir.slice(base.length + 1)]);
    } finally {
      await alive.remove();
    }
  });

  describe("item 14: Chromium sees none of the fleet's secrets, and runs in its sandbox where the platform allows", () => {
    const canary = `canary-${process.pid}-${Date.now()}`;
    const secrets = {
      DASHBOARD_PASSWORD: `${canary}-dashboard`,
      MONGO_URL: `mongodb://crawlfleet:${canary}-mongo@127.0.0.1:1/crawlfleet`,
      PROXY_LIST: `http://user:${canary}-proxy@127.0.0.1:9`,
      DASHBOARD_USER: 'admin',
    };
    const SECRET_NAMES = ['REDIS_URL', 'MONGO_URL', 'PROXY_LIST', 'DASHBOARD_PASSWORD', 'DASHBOARD_USER', 'QUEUE_PREFIX'];

    /** Every Chromium process of the renderer: its environment holds no secret, by name or by value. Returns their command lines. */
    function expectNoSecrets(run: Rendering): string[] {
      const pids = run.chromium();
      expect(pids.length).toBeGreaterThan(1);
      const environs = pids.map((pid) => procList(pid, 'environ'));
      const leaked = environs.flat().filter((v) => SECRET_NAMES.includes(v.split('=')[0]!) || v.includes(canary) || v.includes(REDIS_URL));
      expect(leaked).toEqual([]);
      // ...and still what it needs to run.
      const browser = pids.findIndex(isBrowser);
      expect(environs[browser]!.filter((v) => /^(PATH|HOME|TMPDIR)=/.test(v)).length).toBe(3);
      return pids.map(commandLine);
    }

    /** The user namespace a process runs in ('' once it ended). */
    const userNamespace = (pid: number) => {
      try {
        return readlinkSync(`/proc/${pid}/ns/user`);
      } catch {
        return '';
      }
    };

    test('as root (this machine runs tests as root): no secret reaches Chromium; it runs without its sandbox, which Chromium refuses to root, and the renderer says why', async () => {
      if (process.getuid!() !== 0) return; // the next test covers a non-root renderer
      const run = await rendering('launch-env-root', tempDir('launch-env-root'), secrets);
      try {
        const cmdlines = expectNoSecrets(run);
        expect(cmdlines.some((c) => c.includes('--no-sandbox'))).toBe(true);
        const said = run
          .log()
          .split('\n')
          .filter((line) => line.includes('"msg":"Chromium runs without its sandbox"'));
        expect(said).toHaveLength(1);
        expect(said[0]).toContain('Chromium refuses its sandbox to root');
      } finally {
        await run.stop();
      }
    });

    test('as a non-root user with user namespaces (the image runs it as node, uid 1000): no secret reaches Chromium, and its pages run in the sandbox (their own user namespace, no --no-sandbox)', async () => {
      // A renderer as uid 1000: in a user namespace of its own when this runs as root (root outside,
      // 1000 inside: Chromium sees a non-root user), else as this user.
      const asUser = (env: NodeJS.ProcessEnv): ChildProcess =>
        process.getuid!() === 0
          ? spawn('unshare', ['--user', '--map-user=1000', '--map-group=1000', '--', CLI, 'worker', 'renderer', '--concurrency', '2'], { env, cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
          : spawnCli(['worker', 'renderer', '--concurrency', '2'], { env });
      const run = await rendering('launch-env-user', tempDir('launch-env-user'), secrets, asUser);
      try {
        const cmdlines = expectNoSecrets(run);
        expect(cmdlines.filter((c) => c.includes('--no-sandbox'))).toEqual([]);
        // The namespace sandbox: each page's process (a renderer, while a page is open) in a user
        // namespace other than the browser's.
        const browser = run.chromium().find(isBrowser)!;
        const browserNamespace = userNamespace(browser);
        const pages = new Map<number, string>();
        await waitFor(
          () => {
            for (const pid of run.chromium().filter((p) => commandLine(p).includes('--type=renderer'))) {
              const namespace = userNamespace(pid);
              if (namespace) pages.set(pid, namespace);
            }
            return pages.size > 0;
          },
          60_000,
          'a page process (--type=renderer) to look at',
        );
        expect([...pages.values()].filter((namespace) => namespace === browserNamespace)).toEqual([]);
        expect(run.log()).toContain('Chromium runs in its sandbox');
      } finally {
        await run.stop();
      }
    });
  });
});
