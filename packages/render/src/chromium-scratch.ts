import { accessSync, constants } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { type Server, connect, createServer } from 'node:net';
import { join } from 'node:path';

/** The prefix of a renderer process's own directory in the temp directory. */
export const SCRATCH_PREFIX = 'crawlfleet-render-';
/** The socket a directory's owner listens on while it lives (ChromiumScratch). */
const OWNER_SOCKET = 'owner.sock';
/** The environment variable that tells the launcher where the browser's profile goes. */
export const PROFILE_ENV = 'CRAWLFLEET_CHROMIUM_PROFILE';
/** A directory without an owner socket this old is a start that died before it listened. */
export const OWNERLESS_GRACE_MS = 60_000;

/**
 * Removal of a browser's files as it ends: Chromium's helper processes may still write into its
 * profile for a moment after the browser has closed (rmdir then meets ENOTEMPTY), so Node's rm
 * retries those errors a few times, a little longer each time (about 5 s in all).
 */
export const RM_WHILE_CHROMIUM_ENDS = { recursive: true, force: true, maxRetries: 10, retryDelay: 100 } as const;

/** Where one browser's files go, all inside its renderer's directory. */
export interface BrowserDirs {
  /** removed when the browser closes */
  root: string;
  /** Chromium's profile (the launcher puts it here instead of playwright-core's in the shared temp) */
  profile: string;
  /** playwright-core's downloads, traces and the like */
  artifacts: string;
}

/**
 * A renderer process's own directory for Chromium, made with mkdtemp (a fresh name, mode 0700, so no
 * other user can enter it or have planted anything in it). Everything the browser leaves on disk
 * goes in it: the launcher script Chromium is started through (written by this process, never
 * reused from a path another user could have written first), each browser's profile and artifacts,
 * and Chromium's own temp files. While its process lives, it listens on `owner.sock` inside; a
 * renderer killed with kill -9 leaves its directory behind, and the next renderer to start on the
 * same temp directory (a restarted container on its emptyDir) finds the socket refusing and removes
 * it (sweepAbandoned). A socket, not a pid: pids repeat across a container's restarts, and a pid
 * namespace hides another container's processes; a listening socket is the kernel's own record
 * that its owner lives.
 */
export class ChromiumScratch {
  private browsers = 0;

  private constructor(
    /** the directory: `<tmp>/crawlfleet-render-XXXXXX` */
    readonly dir: string,
    /** the script playwright-core launches as the browser's executable */
    readonly launcher: string,
    private readonly owner: Server,
  ) {}

  /** Chromium's TMPDIR: its temp files stay inside too. */
  get tmp(): string {
    return join(this.dir, 'tmp');
  }

  /** Makes the directory under `base`, starts listening as its owner, and writes the launcher for `executablePath`. */
  static async create(base: string, executablePath: string): Promise<ChromiumScratch> {
    const dir = await mkdtemp(join(base, SCRATCH_PREFIX));
    const owner = await listenAsOwner(join(dir, OWNER_SOCKET));
    const launcher = join(dir, 'chromium.sh');
    // 'wx': created here, never an existing file; 0700: only this user runs or reads it.
    await writeFile(launcher, launcherScript(executablePath, findSetpriv()), { mode: 0o700, flag: 'wx' });
    await mkdir(join(dir, 'tmp'), { mode: 0o700 });
    return new ChromiumScratch(dir, launcher, owner);
  }

  /** Makes the directories of the next browser. */
  async nextBrowser(): Promise<BrowserDirs> {
    const root = join(this.dir, `browser-${++this.browsers}`);
    const dirs = { root, profile: join(root, 'profile'), artifacts: join(root, 'artifacts') };
    await mkdir(dirs.profile, { recursive: true, mode: 0o700 });
    await mkdir(dirs.artifacts, { mode: 0o700 });
    return dirs;
  }

  /** Stops listening and removes the directory and everything in it. */
  async remove(): Promise<void> {
    await new Promise<void>((resolve) => this.owner.close(() => resolve()));
    await rm(this.dir, RM_WHILE_CHROMIUM_ENDS);
  }
}

/**
 * The longest path of a Unix socket (sun_path is 108 bytes on Linux, its NUL included). Chromium binds
 * its SingletonSocket at `<TMPDIR>/org.chromium.Chromium.XXXXXX/SingletonSocket`, and aborts at start
 * ("Socket path too long") when that is longer.
 */
export const MAX_SOCKET_PATH = 107;
const CHROMIUM_SOCKET_TAIL = '/org.chromium.Chromium.XXXXXX/SingletonSocket';

/**
 * Pure: where the renderer's directory goes: under `preferred` (TMPDIR) when Chromium's socket fits
 * there, else under `fallback` (/tmp): a TMPDIR deep in a build or test tree would otherwise stop
 * every browser from starting.
 */
export function scratchBase(preferred: string, fallback = '/tmp'): string {
  const longest = (base: string) => Buffer.byteLength(join(base, `${SCRATCH_PREFIX}XXXXXX`, 'tmp')) + CHROMIUM_SOCKET_TAIL.length;
  return longest(preferred) <= MAX_SOCKET_PATH ? preferred : fallback;
}

/** A server on `path` that answers a connection by closing it: only its existence says something. */
async function listenAsOwner(path: string): Promise<Server> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  // It must not keep the renderer alive.
  server.unref();
  return server;
}

/** What a probe of a directory's owner socket found. */
export type OwnerState = 'listening' | 'refused' | 'absent' | 'unknown';

/** Facts about an entry of the temp directory that looks like a renderer's directory. */
export interface ScratchFacts {
  isDirectory: boolean;
  /** its owner's uid, and ours: only our own directories are ours to judge */
  uid: number;
  myUid: number;
  owner: OwnerState;
  ageMs: number;
}

/**
 * Pure: whether a renderer's directory is abandoned (its process is gone) and may be removed. Its
 * socket refusing says its owner died; no socket at all, a start that died before listening (or
 * one that is starting now, hence the grace). A listening socket, an unreadable state, a symlink or
 * another user's directory is left alone.
 */
export function isAbandoned(facts: ScratchFacts, graceMs = OWNERLESS_GRACE_MS): boolean {
  if (!facts.isDirectory || facts.uid !== facts.myUid) return false;
  if (facts.owner === 'refused') return true;
  return facts.owner === 'absent' && facts.ageMs > graceMs;
}

/** Connects to a directory's owner socket: does anyone listen? */
export function probeOwner(dir: string, timeoutMs = 2000): Promise<OwnerState> {
  return new Promise((resolve) => {
    const socket = connect(join(dir, OWNER_SOCKET));
    const done = (state: OwnerState) => {
      socket.destroy();
      resolve(state);
    };
    socket.setTimeout(timeoutMs, () => done('unknown'));
    socket.once('connect', () => done('listening'));
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code === 'ECONNREFUSED' ? 'refused' : error.code === 'ENOENT' ? 'absent' : 'unknown'));
  });
}

/**
 * Removes the renderers' directories under `base` whose processes are gone (kill -9, OOM kill, a
 * crash), except `keep`. Returns the ones removed.
 */
export async function sweepAbandoned(base: string, keep?: string, nowMs = Date.now()): Promise<string[]> {
  const myUid = process.getuid?.() ?? -1;
  const removed: string[] = [];
  for (const name of await readdir(base)) {
    const dir = join(base, name);
    if (!name.startsWith(SCRATCH_PREFIX) || dir === keep) continue;
    const info = await lstat(dir).catch(() => undefined);
    if (!info) continue;
    // Only our own directories are probed: another user's is never ours to remove.
    const owner = info.isDirectory() && info.uid === myUid ? await probeOwner(dir) : 'unknown';
    if (!isAbandoned({ isDirectory: info.isDirectory(), uid: info.uid, myUid, owner, ageMs: nowMs - info.mtimeMs })) continue;
    await rm(dir, { recursive: true, force: true });
    removed.push(dir);
  }
  return removed;
}

/** Pure: `value` quoted for a POSIX shell (single quotes; a quote inside closes, escapes and reopens). */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * Pure: the launcher's text. It runs Chromium with the parent-death signal set (util-linux
 * setpriv), so the kernel kills the browser when the renderer dies however it dies; Chromium's own
 * helper processes end with it. Without setpriv, Chromium itself (it also exits when its DevTools
 * pipe closes). And it moves the profile: playwright-core makes an empty one in the shared temp
 * directory (it has no option for where), which a kill -9 would leave there; the launcher removes
 * that empty directory and gives Chromium the one named by CRAWLFLEET_CHROMIUM_PROFILE, inside the
 * renderer's own directory.
 */
export function launcherScript(executablePath: string, setpriv: string | undefined): string {
  const run = setpriv ? `${shellQuote(setpriv)} --pdeathsig KILL -- ${shellQuote(executablePath)}` : shellQuote(executablePath);
  return [
    '#!/bin/sh',
    `profile=$${PROFILE_ENV}`,
    `unset ${PROFILE_ENV}`,
    // Each argument is shifted off and put back, the profile's rewritten.
    'for arg do',
    '  shift',
    '  case $arg in',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a template
    '    --user-data-dir=*) if [ -n "$profile" ]; then rmdir -- "${arg#--user-data-dir=}" 2>/dev/null; arg="--user-data-dir=$profile"; fi ;;',
    '  esac',
    '  set -- "$@" "$arg"',
    'done',
    `exec ${run} "$@"`,
    '',
  ].join('\n');
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
