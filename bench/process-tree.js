// CPU and memory of a process and everything it starts (a browser's processes included), for
// crawlers that start other processes. GNU time (processes.js) counts the CPU of the descendants that
// were waited for, and nothing of those orphaned on the way (Chromium's processes: a closed browser's
// renderers and zygotes are not all waited for by it), and its peak RSS is the largest single
// process's, not the tree's.
//
// The command runs under a small python3 wrapper that makes itself a child subreaper
// (PR_SET_CHILD_SUBREAPER): every process of the tree that is orphaned is re-parented to it, not to
// init, and it waits for all of them, so its RUSAGE_CHILDREN is the CPU of the whole tree, exact
// (the kernel adds a process's CPU, and that of the children it waited for, to its parent's when it
// is reaped). Processes still running when the command has exited get `lingerSeconds` to finish,
// then SIGKILL (`killedStragglers` says how many).
//
// Beside it, a sampler reads /proc every `intervalMs`: the tree is the wrapper and every process
// whose parent or session leader is in it (Playwright starts Chromium in a session of its own).
// - peak RSS of the tree: the largest sum of RSS over the tree at one sample (shared pages counted
//   once per process, so above what the tree really holds: Chromium's processes share much);
// - peak PSS of the tree (every `pssEvery`-th sample, from /proc/<pid>/smaps_rollup): shared pages
//   divided among the processes that share them, so the sum is what the tree holds;
// - sampled CPU: utime + stime of each process at its last sample, summed: a cross-check of the
//   exact figure, below it by what processes spent after their last sample.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const TICK = 100; // USER_HZ: /proc's times are in 1/100 s
const PAGE_KB = 4;

/** Pure: the fields of /proc/<pid>/stat we use (the name may hold spaces and parentheses). */
export function parseStat(text) {
  const close = text.lastIndexOf(')');
  const name = text.slice(text.indexOf('(') + 1, close);
  const f = text.slice(close + 2).split(' ');
  return {
    pid: Number(text.slice(0, text.indexOf(' '))),
    name,
    ppid: Number(f[1]),
    session: Number(f[3]),
    cpuTicks: Number(f[11]) + Number(f[12]), // utime + stime
    start: Number(f[19]), // starttime: a pid and its start tell a process from a later one with the pid
    rssKb: Number(f[21]) * PAGE_KB,
  };
}

function readStat(pid) {
  try {
    return parseStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined; // gone between the listing and the read
  }
}

/** Proportional set size of a process in KB (0 when it is gone or unreadable). */
function pssKb(pid) {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function allProcesses() {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue;
    const s = readStat(name);
    if (s) out.push(s);
  }
  return out;
}

/**
 * A readable kind for a process: its name, and for Chromium's processes their role (`--type`, and
 * a utility process's sub-type): chromium:browser, chromium:renderer, chromium:gpu-process, ...
 */
function kindOf(p) {
  let cmd;
  try {
    cmd = readFileSync(`/proc/${p.pid}/cmdline`, 'utf8');
  } catch {
    return p.name;
  }
  const exe = cmd.split(/[\0 ]/)[0]; // Chromium's children rewrite their command line, spaces between
  if (!/chrom/i.test(exe) || /crashpad/.test(exe)) return p.name;
  const type = /--type=([\w-]+)/.exec(cmd)?.[1];
  const sub = /--utility-sub-type=([\w.]+)/.exec(cmd)?.[1];
  return `chromium:${type ?? 'browser'}${sub ? `:${sub.replace(/\.mojom\./, '.')}` : ''}`;
}

/** A process, told from a later one that reuses its pid. */
const keyOf = (p) => `${p.pid}:${p.start}`;

/**
 * Pure: one sample's members of the tree rooted at `root`: the root, any process seen in the tree
 * before (`known`, a map by keyOf), and any whose parent or session leader is a member.
 */
export function treeMembers(root, processes, known) {
  const byPid = new Map(processes.map((p) => [p.pid, p]));
  const memo = new Map();
  const inTree = (p, depth = 0) => {
    if (memo.has(p.pid)) return memo.get(p.pid);
    memo.set(p.pid, false); // a cycle (pid reuse) ends here
    let yes = p.pid === root || known.has(keyOf(p));
    if (!yes && depth < 64) {
      const parent = byPid.get(p.ppid);
      const leader = byPid.get(p.session);
      yes = (parent !== undefined && inTree(parent, depth + 1)) || (leader !== undefined && leader !== p && inTree(leader, depth + 1));
    }
    memo.set(p.pid, yes);
    return yes;
  };
  return processes.filter((p) => inTree(p));
}

/** The subreaper: `python3 -c WRAPPER usage-file linger-seconds command args...`. */
const WRAPPER = `
import ctypes, json, os, resource, signal, sys, time
usage_file, linger, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    raise OSError(ctypes.get_errno(), 'prctl(PR_SET_CHILD_SUBREAPER)')
status = None
forked = time.monotonic()
main = os.fork()
if main == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
for s in (signal.SIGTERM, signal.SIGINT):
    signal.signal(s, lambda n, f: status is None and os.kill(main, n))
def children():
    me, out = str(os.getpid()), []
    for p in os.listdir('/proc'):
        if p.isdigit():
            try:
                with open('/proc/%s/stat' % p) as f:
                    if f.read().rsplit(')', 1)[1].split()[1] == me: out.append(int(p))
            except OSError:
                pass
    return out
deadline, killed, seconds = None, 0, None
while True:
    try:
        pid, st = os.waitpid(-1, 0 if deadline is None else os.WNOHANG)
    except ChildProcessError:
        break
    if pid == main:
        status, seconds = st, time.monotonic() - forked
        deadline = time.monotonic() + linger
    elif pid == 0:
        if time.monotonic() > deadline:
            for c in children():
                try:
                    os.kill(c, signal.SIGKILL); killed += 1
                except OSError:
                    pass
            deadline = float('inf')
        time.sleep(0.05)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(usage_file, 'w') as f:
    json.dump({'user': u.ru_utime, 'sys': u.ru_stime, 'killed': killed, 'seconds': seconds}, f)
sys.exit(os.waitstatus_to_exitcode(status) % 256 if status is not None else 1)
`;

let counter = 0;

/**
 * Spawns `command args` (stdout piped, stderr inherited) under the subreaper and measures its tree
 * until it and every process it started have exited. Resolves with { code, stdout, seconds (the
 * command's wall time, from its fork to its exit), cpuSeconds (exact), sampledCpuSeconds, peakTreeRssMB, peakTreePssMB,
 * processes (how many were seen), cpuSecondsByName (sampled) and processesByName (by kindOf),
 * killedStragglers }.
 */
export function runTreeMeasured(command, args, { env, cwd, dir, intervalMs = 200, pssEvery = 5, lingerSeconds = 10 }) {
  const usageFile = join(dir, `tree-usage-${process.pid}-${++counter}.json`);
  const child = spawn('python3', ['-c', WRAPPER, usageFile, String(lingerSeconds), command, ...args], { env, cwd, stdio: ['ignore', 'pipe', 'inherit'] });
  const known = new Map(); // keyOf -> { name, cpuTicks }: the last figures of every process seen
  let peakRssKb = 0;
  let peakPssKb = 0;
  let samples = 0;
  const sample = () => {
    const withPss = samples++ % pssEvery === 0;
    let rss = 0;
    let pss = 0;
    const members = treeMembers(child.pid, allProcesses(), known);
    for (const p of members) {
      if (p.pid === child.pid) continue; // the wrapper itself
      const key = keyOf(p);
      const last = known.get(key);
      // read at each sample until it is a Chromium process's role, then kept: Debian's
      // /usr/bin/chromium is a shell script that execs the browser under the same name, and a
      // process the zygote forks has the zygote's command line until it sets its own
      const name = last?.name.startsWith('chromium:') && last.name !== 'chromium:zygote' ? last.name : kindOf(p);
      known.set(key, { name, cpuTicks: p.cpuTicks });
      rss += p.rssKb;
      if (withPss) pss += pssKb(p.pid);
    }
    peakRssKb = Math.max(peakRssKb, rss);
    peakPssKb = Math.max(peakPssKb, pss);
  };
  let stdout = '';
  child.stdout.on('data', (d) => (stdout += d));
  const timer = setInterval(sample, intervalMs);
  sample();
  return new Promise((resolve, reject) => {
    child.on('error', (err) => {
      clearInterval(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearInterval(timer);
      let usage;
      try {
        usage = JSON.parse(readFileSync(usageFile, 'utf8'));
        rmSync(usageFile, { force: true });
      } catch (err) {
        reject(new Error(`${command}: the tree's usage was not written (${err.message}); exit ${code}`));
        return;
      }
      let sampledTicks = 0;
      const byName = {};
      const counts = {};
      for (const k of known.values()) {
        sampledTicks += k.cpuTicks;
        byName[k.name] = (byName[k.name] ?? 0) + k.cpuTicks / TICK;
        counts[k.name] = (counts[k.name] ?? 0) + 1;
      }
      resolve({
        code,
        stdout,
        seconds: usage.seconds,
        cpuSeconds: usage.user + usage.sys,
        sampledCpuSeconds: sampledTicks / TICK,
        peakTreeRssMB: Math.round(peakRssKb / 1024),
        peakTreePssMB: Math.round(peakPssKb / 1024),
        processes: known.size,
        cpuSecondsByName: Object.fromEntries(
          Object.entries(byName)
            .sort((a, b) => b[1] - a[1])
            .map(([n, s]) => [n, Number(s.toFixed(2))]),
        ),
        processesByName: counts,
        killedStragglers: usage.killed,
      });
    });
  });
}
