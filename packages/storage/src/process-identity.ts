import { readFileSync, readlinkSync } from 'node:fs';

/**
 * A process as its kernel knows it. A pid means something only inside one pid namespace of one
 * kernel boot: two containers with one host name each have a pid 1, and a pid of the host is no pid
 * inside a container. So a lock's owner can be looked up by pid only when it ran in this very
 * namespace of this very boot; anywhere else only its lease tells (file-lock.ts).
 */
export interface ProcessIdentity {
  /** /proc/sys/kernel/random/boot_id: one boot of one kernel (another machine, or a reboot, has another) */
  boot: string;
  /** /proc/self/ns/pid, `pid:[4026531836]`: the pid namespace, unique among a kernel's live namespaces */
  pidNs: string;
  /** the pid inside that namespace */
  pid: number;
  /** field 22 of /proc/PID/stat: when the process started, in clock ticks since boot (a reused pid has another) */
  startTicks: number;
}

/** Pure: a /proc/PID/stat line's state (field 3) and start time (field 22); the command name (field 2) may hold spaces and parentheses. */
export function parseStat(stat: string): { state: string; startTicks: number } | undefined {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const startTicks = Number(fields[19]); // field 22, counted from field 3 after the name
  return fields[0] && Number.isSafeInteger(startTicks) && startTicks >= 0 ? { state: fields[0], startTicks } : undefined;
}

/** Pure: the pids of /proc/self/status's `NSpid:` line, from the /proc mount's namespace down to the process's own. */
export function statusNsPids(status: string): number[] {
  const line = /^NSpid:\s*(.*)$/m.exec(status);
  return line ? line[1]!.trim().split(/\s+/).map(Number) : [];
}

/**
 * This process's identity, or undefined where it cannot be known for sure: no /proc (not Linux), or
 * a /proc mounted for another pid namespace than this process's (NSpid then lists more than one
 * pid), where pids read from it are not the pids this process can signal.
 */
export function readProcessIdentity(proc = '/proc'): ProcessIdentity | undefined {
  try {
    const nsPids = statusNsPids(readFileSync(`${proc}/self/status`, 'utf8'));
    if (nsPids.length !== 1 || nsPids[0] !== process.pid) return undefined;
    const startTicks = parseStat(readFileSync(`${proc}/self/stat`, 'utf8'))?.startTicks;
    const boot = readFileSync(`${proc}/sys/kernel/random/boot_id`, 'utf8').trim();
    const pidNs = readlinkSync(`${proc}/self/ns/pid`);
    if (startTicks === undefined || boot === '' || !pidNs.startsWith('pid:')) return undefined;
    return { boot, pidNs, pid: process.pid, startTicks };
  } catch {
    return undefined;
  }
}

/**
 * Whether the process `owner` names is gone, asked of this namespace (the caller has checked that
 * the owner ran in it): no process has its pid, or the one that has it started at another time (the
 * pid was reused), or it is a zombie. A process /proc does not show (mounted with hidepid) but that signals reach is
 * taken as alive.
 */
export function processIsGone(owner: Pick<ProcessIdentity, 'pid' | 'startTicks'>, proc = '/proc'): boolean {
  try {
    process.kill(owner.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return true;
    // EPERM: it exists, under another user
  }
  let stat: string;
  try {
    stat = readFileSync(`${proc}/${owner.pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  const seen = parseStat(stat);
  // Z: killed, not yet reaped by its parent; X: being removed
  return seen !== undefined && (seen.startTicks !== owner.startTicks || seen.state === 'Z' || seen.state === 'X');
}
