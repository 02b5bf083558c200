import { createLogger } from '@crawlfleet/core';
import { StageThreadError, startStageThread } from '../../services/cli/src/stage-thread.js';
import { concurrencyPerThread, parseConcurrency } from '../../services/cli/src/parser-threads.js';

const fixture = (name: string) => new URL(`../fixtures/threads/${name}`, import.meta.url);
const log = createLogger({ level: 'silent' });

describe('a stage in a worker thread', () => {
  test('closes when asked: close() resolves and `failed` never settles', async () => {
    const thread = await startStageThread('parser', fixture('ready-then.mjs'), 'serve', log);
    expect(thread.threadId).toBeGreaterThan(0);
    let settled = false;
    thread.failed.catch(() => (settled = true));
    await thread.close();
    await new Promise((r) => setTimeout(r, 50));
    expect(settled).toBe(false);
  });

  test('an uncaught error in the thread rejects `failed` with that error', async () => {
    const thread = await startStageThread('parser', fixture('ready-then.mjs'), 'throw', log);
    const err = await thread.failed.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StageThreadError);
    expect((err as StageThreadError).message).toBe(`parser thread ${thread.threadId} ended with an error: the parse stage broke`);
    expect((err as StageThreadError).code).toBe('ERR_STAGE_THREAD');
    await expect(thread.close()).rejects.toThrow('the parse stage broke');
  });

  test('an exit nobody asked for rejects `failed` with its exit code', async () => {
    const thread = await startStageThread('parser', fixture('ready-then.mjs'), 'exit', log);
    await expect(thread.failed).rejects.toThrow(`parser thread ${thread.threadId} ended with exit code 3`);
  });

  test('a thread that fails before it is ready rejects the start', async () => {
    await expect(startStageThread('parser', fixture('fails-at-start.mjs'), undefined, log)).rejects.toThrow(/parser thread \d+ ended with an error: cannot connect/);
  });
});

describe('parse concurrency', () => {
  test('a quarter of the fetches, at least 2, shared among the threads', () => {
    expect([1, 8, 16, 64].map(parseConcurrency)).toEqual([2, 2, 4, 16]);
    expect([1, 2, 3, 8].map((n) => concurrencyPerThread(16, n))).toEqual([16, 8, 6, 2]);
  });
});
