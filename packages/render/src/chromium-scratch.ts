import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The prefix of a renderer process's own directory in the temp directory. */
export const SCRATCH_PREFIX = 'crawlfleet-render-';

/**
 * A renderer process's own directory for Chromium, made with mkdtemp (a fresh name, mode 0700, so no
 * other user can enter it or have planted anything in it): the launcher script Chromium is started
 * through lives there, written by this process and never reused from a path another user could
 * have written first.
 */
export class ChromiumScratch {
  private constructor(
    /** the directory: `<tmp>/crawlfleet-render-XXXXXX` */
    readonly dir: string,
    /** the script playwright-core launches as the browser's executable */
    readonly launcher: string,
  ) {}

  /** Makes the directory under `base` and writes the launcher for `executablePath` in it. */
  static async create(base: string, executablePath: string): Promise<ChromiumScratch> {
    const dir = await mkdtemp(join(base, SCRATCH_PREFIX));
    const launcher = join(dir, 'chromium.sh');
    // 'wx': created here, never an existing file; 0700: only this user runs or reads it.
    await writeFile(launcher, launcherScript(executablePath, findSetpriv()), { mode: 0o700, flag: 'wx' });
    return new ChromiumScratch(dir, launcher);
  }

  /** Removes the directory and everything in it. */
  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** Pure: `value` quoted for a POSIX shell (single quotes; a quote inside closes, escapes and reopens). */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * Pure: the launcher's text. It runs Chromium with the parent-death signal set (util-linux
 * setpriv), so the kernel kills the browser when the renderer dies however it dies; Chromium's own
 * helper processes end with it. Without setpriv, Chromium itself (it also exits when its DevTools
 * pipe closes).
 */
export function launcherScript(executablePath: string, setpriv: string | undefined): string {
  const run = setpriv ? `${shellQuote(setpriv)} --pdeathsig KILL -- ${shellQuote(executablePath)}` : shellQuote(executablePath);
  return `#!/bin/sh\nexec ${run} "$@"\n`;
}

function findSetpriv(): string | undefined {
  return ['/usr/bin/setpriv', '/bin/setpriv'].find(executable);
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
