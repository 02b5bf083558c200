import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const CLI = join(ROOT, 'bin', 'crawlfleet');

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

let counter = 0;
/** A fresh key prefix per test, so tests share one Redis without seeing each other. */
export function uniquePrefix(name: string): string {
  return `t-${name}-${process.pid}-${Date.now().toString(36)}-${counter++}`;
}

export function testEnv(prefix: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, REDIS_URL, QUEUE_PREFIX: prefix, LOG_LEVEL: 'info', LOCK_DURATION_MS: '5000', ...extra };
}

export function tempDir(name = 'crawlfleet'): string {
  return mkdtempSync(join(tmpdir(), `${name}-`));
}

export function writeJson(dir: string, file: string, value: unknown): string {
  const path = join(dir, file);
  writeFileSync(path, JSON.stringify(value, null, 2));
  return path;
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Starts the launcher as its own OS process. */
export function spawnCli(args: string[], options: { env: NodeJS.ProcessEnv; cwd?: string }): ChildProcess & { result: Promise<CliResult> } {
  const child = spawn(CLI, args, { env: options.env, cwd: options.cwd ?? ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const result = new Promise<CliResult>((resolvePromise) => {
    child.on('close', (code, signal) => resolvePromise({ code, signal, stdout, stderr }));
  });
  return Object.assign(child, { result });
}

/**
 * Runs the launcher to its end. `timeoutMs` bounds a hang, not the machine's speed: a crawl that
 * takes 60 s on a quiet machine took over 120 s (the old bound) beside another test and a busy core.
 * The default stays below jest's test timeout, so that a hang fails with the tail of the command's
 * stderr rather than with jest's timeout alone.
 */
export async function runCli(args: string[], options: { env: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number }): Promise<CliResult> {
  return resultWithin(spawnCli(args, options), options.timeoutMs ?? 300_000, `crawlfleet ${args.join(' ')}`);
}

export function readJsonl(path: string): Record<string, unknown>[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Removes every key a test wrote under its prefix. */
export async function dropPrefix(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1, retryStrategy: () => null });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The item set without the fields that differ between runs, sorted, for exact comparison. */
export function comparable(items: Record<string, unknown>[], keep: string[]): Record<string, unknown>[] {
  return items.map((i) => Object.fromEntries(keep.map((k) => [k, i[k]]))).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
}

/**
 * The child's result, or after `timeoutMs` an error that carries the tail of its stderr: a hang in
 * CI then says where the child was, instead of only that jest's timeout ran out.
 */
export async function resultWithin(child: ChildProcess & { result: Promise<CliResult> }, timeoutMs: number, what: string): Promise<CliResult> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolveTimeout) => (timer = setTimeout(() => resolveTimeout('timeout'), timeoutMs)));
  const first = await Promise.race([child.result, timedOut]);
  clearTimeout(timer);
  if (first !== 'timeout') return first;
  child.kill('SIGKILL');
  const { stderr } = await child.result;
  throw new Error(`${what} did not finish within ${timeoutMs} ms; the tail of its stderr:\n${stderr.slice(-4000)}`);
}

/** A dead-letter record as tests read it. */
export interface DeadLetterRecord {
  url: string;
  stage: string;
  code: string;
  reason: string;
  attempts: number;
  at: string;
  // biome-ignore lint/suspicious/noExplicitAny: a job's payload, whatever its stage
  data?: any;
}

/** A crawl's dead-letter records, from every partition (getDeadLetters), for assertions. */
export async function deadLetters(redis: import('ioredis').Redis, prefix: string, crawlId: string): Promise<DeadLetterRecord[]> {
  const { Keys } = await import('@crawlfleet/core');
  const { getDeadLetters } = await import('@crawlfleet/crawl');
  return Object.values(await getDeadLetters(redis, new Keys(prefix), crawlId)) as DeadLetterRecord[];
}
