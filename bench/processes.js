// Child processes measured by GNU time: wall seconds, user + system CPU seconds and peak RSS (the
// kernel's ru_maxrss) of each, taken by the kernel when the process ends, start-up included.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const TIME = '/usr/bin/time';
let counter = 0;

/**
 * Starts `command args` under /usr/bin/time. `exited` resolves with the exit code, stdout and the
 * usage { cpuSeconds, peakRssMB }; `stop()` sends SIGTERM to the measured process itself (time
 * would die of it and report nothing), so a worker shuts down gracefully and is measured whole.
 */
export function startMeasured(role, command, args, { env, dir }) {
  const usageFile = join(dir, `usage-${process.pid}-${++counter}.txt`);
  const child = spawn(TIME, ['-o', usageFile, '-f', '%e %U %S %M', command, ...args], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.on('data', (d) => (stdout += d));
  const exited = new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      const last = readFileSync(usageFile, 'utf8').trim().split('\n').pop();
      const [, user, sys, maxKb] = last.split(' ').map(Number);
      resolve({ role, code, stdout, cpuSeconds: user + sys, peakRssMB: Math.round(maxKb / 1024) });
    });
  });
  const stop = () => {
    for (const pid of childrenOf(child.pid)) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
  };
  return { role, exited, stop };
}

function childrenOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Runs to the end; throws with the role when it exits non-zero. */
export async function runMeasured(role, command, args, options) {
  const result = await startMeasured(role, command, args, options).exited;
  if (result.code !== 0) throw new Error(`${role} (${command} ${args.join(' ')}) exited ${result.code}`);
  return result;
}

/** CPU seconds a running process has used so far (utime + stime from /proc), for servers we did not start under time. */
export function cpuSecondsOf(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}
