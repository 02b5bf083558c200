import { randomUUID } from 'node:crypto';
import { type FileHandle, link, open, readFile, rename, stat, unlink, utimes } from 'node:fs/promises';
import { hostname } from 'node:os';
import { type ProcessIdentity, processIsGone, readProcessIdentity } from './process-identity.js';

/** Who holds a lock file: written into it when taken. */
export interface LockOwner {
  /** pid and host name, for a person reading the file or an error message: never trusted (see lockIsStale) */
  pid: number;
  host: string;
  token: string;
  /** when it was taken (ISO), for a person reading the file */
  since: string;
  /** the owner as its kernel knows it, where it could tell (Linux) */
  process?: ProcessIdentity;
}

export interface LockSeen {
  /** undefined when the file does not parse (its owner died while writing it) */
  owner: LockOwner | undefined;
  /** when its owner last renewed it */
  mtimeMs: number;
}

/**
 * Whether a lock file seen now may be taken over. Its owner renews it (its mtime) every `staleMs / 3`,
 * so it is stale once not renewed for `staleMs`, whoever and wherever the owner was: that holds
 * across hosts, containers and pid namespaces. Sooner only when the owner is proven gone: it ran in
 * this process's pid namespace of this kernel boot (`here.process`), and `isGone` finds no live
 * process with its pid and start time. A host name and a pid alone prove nothing: containers with
 * one host name (`--network host`, `hostNetwork`, an explicit `hostname:`) each have a pid 1, and
 * another namespace's pids are not ours to look up.
 */
export function lockIsStale(seen: LockSeen, now: number, staleMs: number, here: { process: ProcessIdentity | undefined; isGone: (owner: ProcessIdentity) => boolean }): boolean {
  if (now - seen.mtimeMs > staleMs) return true;
  const owner = seen.owner?.process;
  if (owner === undefined || here.process === undefined) return false;
  if (owner.boot !== here.process.boot || owner.pidNs !== here.process.pidNs) return false;
  return here.isGone(owner);
}

/** This process as its kernel knows it, the same for every lock it takes. */
const THIS_PROCESS = readProcessIdentity();

function isIdentity(value: unknown): value is ProcessIdentity {
  const p = value as Partial<ProcessIdentity> | undefined;
  return typeof p === 'object' && p !== null && typeof p.boot === 'string' && typeof p.pidNs === 'string' && Number.isSafeInteger(p.pid) && Number.isSafeInteger(p.startTicks);
}

function parseOwner(text: string): LockOwner | undefined {
  try {
    const value = JSON.parse(text) as Partial<LockOwner>;
    if (typeof value.pid !== 'number' || typeof value.host !== 'string' || typeof value.token !== 'string') return undefined;
    const { process: identity, ...owner } = value as LockOwner;
    return isIdentity(identity) ? { ...owner, process: identity } : owner;
  } catch {
    return undefined;
  }
}

function isCode(err: unknown, code: string): boolean {
  return (err as NodeJS.ErrnoException)?.code === code;
}

/**
 * A lock file next to a data file (`<path>.lock`) that keeps it to one writer across processes,
 * containers and hosts that share the file system. It holds a token, the owner's identity (see
 * lockIsStale) and, for people, its pid and host; the owner renews its mtime every `staleMs / 3`
 * while it holds it. A lock not renewed for `staleMs` is taken over (its owner was killed, hung, or
 * its host went away); one whose owner is proven gone in this pid namespace, at once.
 *
 * Taking over renames the stale file aside first (rename is atomic, so of two processes taking over
 * the same stale lock only one moves it); the one that finds it moved a fresh lock instead puts it
 * back. An owner checks its token before each write (`holds`), so a lock lost to a takeover (the
 * owner hung for longer than `staleMs`) stops its writes.
 */
export class FileLock {
  readonly path: string;
  private readonly me: LockOwner;
  private renewal: NodeJS.Timeout | undefined;
  private held = false;

  constructor(
    dataPath: string,
    private readonly staleMs: number,
  ) {
    this.path = `${dataPath}.lock`;
    this.me = { pid: process.pid, host: hostname(), token: randomUUID(), since: '', ...(THIS_PROCESS ? { process: THIS_PROCESS } : {}) };
  }

  /** Takes the lock if it is free or stale; false when another live writer holds it. */
  async tryAcquire(): Promise<boolean> {
    if (await this.create()) return this.taken();
    const seen = await this.look();
    if (!seen) return (await this.create()) && this.taken(); // released meanwhile
    if (!lockIsStale(seen, Date.now(), this.staleMs, { process: THIS_PROCESS, isGone: (owner) => processIsGone(owner) })) return false;
    if (!(await this.removeStale(seen))) return false;
    return (await this.create()) && this.taken();
  }

  /** Whether the lock file still names this owner. */
  async holds(): Promise<boolean> {
    if (!this.held) return false;
    const seen = await this.look();
    if (seen?.owner?.token !== this.me.token) this.lost();
    return this.held;
  }

  /** Who holds it, for an error message. */
  async describeOwner(): Promise<string> {
    const owner = (await this.look())?.owner;
    return owner ? `pid ${owner.pid} on ${owner.host} since ${owner.since}` : 'another writer';
  }

  async release(): Promise<void> {
    if (this.renewal) clearInterval(this.renewal);
    this.renewal = undefined;
    if (!this.held) return;
    this.held = false;
    const seen = await this.look();
    if (seen?.owner?.token === this.me.token) await unlink(this.path).catch(() => undefined);
  }

  private taken(): boolean {
    this.held = true;
    this.renewal = setInterval(() => void this.renew(), Math.max(50, Math.floor(this.staleMs / 3)));
    this.renewal.unref();
    return true;
  }

  private lost(): void {
    this.held = false;
    if (this.renewal) clearInterval(this.renewal);
    this.renewal = undefined;
  }

  private async renew(): Promise<void> {
    try {
      if (!(await this.holds())) return;
      const now = new Date();
      await utimes(this.path, now, now);
    } catch {
      // a failed renewal is retried at the next tick; `holds` before each write is what counts
    }
  }

  /** Creates the lock file if none exists (O_EXCL); false if one does. */
  private async create(): Promise<boolean> {
    let handle: FileHandle;
    try {
      handle = await open(this.path, 'wx');
    } catch (err) {
      if (isCode(err, 'EEXIST')) return false;
      throw err;
    }
    try {
      await handle.writeFile(JSON.stringify({ ...this.me, since: new Date().toISOString() }));
      await handle.sync();
    } finally {
      await handle.close();
    }
    return true;
  }

  private async look(): Promise<LockSeen | undefined> {
    try {
      const [text, info] = await Promise.all([readFile(this.path, 'utf8'), stat(this.path)]);
      return { owner: parseOwner(text), mtimeMs: info.mtimeMs };
    } catch (err) {
      if (isCode(err, 'ENOENT')) return undefined;
      throw err;
    }
  }

  /** Moves a stale lock aside; false if what was moved was not the stale one (a race, put back). */
  private async removeStale(seen: LockSeen): Promise<boolean> {
    const aside = `${this.path}.${this.me.token}.stale`;
    try {
      await rename(this.path, aside);
    } catch (err) {
      if (isCode(err, 'ENOENT')) return true; // someone else removed it: try to create
      throw err;
    }
    const moved = parseOwner(await readFile(aside, 'utf8').catch(() => ''));
    const wasStale = moved?.token === seen.owner?.token;
    if (!wasStale) await link(aside, this.path).catch(() => undefined); // put a fresh owner's lock back
    await unlink(aside).catch(() => undefined);
    return wasStale;
  }
}
