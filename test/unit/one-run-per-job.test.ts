import type { Job } from 'bullmq';
import { oneRunPerJob } from '@crawlfleet/runtime';

const job = (id: string) => ({ id, data: {} }) as unknown as Job;

describe('one run of a job at a time in a process', () => {
  test('a job taken again while its run goes on is handed to takenAgain, not run; once that run ended (even failed), it runs; other jobs run at once', async () => {
    const started: string[] = [];
    const again: string[] = [];
    const gates = new Map<string, (ok: boolean) => void>();
    const run = oneRunPerJob(
      (j) =>
        new Promise<void>((resolve, reject) => {
          started.push(j.id!);
          gates.set(j.id!, (ok) => (ok ? resolve() : reject(new Error('lock lost'))));
        }),
      async (j) => {
        again.push(j.id!);
        throw new Error('parked');
      },
    );
    const first = run(job('a')).catch((e: Error) => e.message);
    const other = run(job('b'));
    await expect(run(job('a'))).rejects.toThrow('parked');
    expect(started).toEqual(['a', 'b']);
    expect(again).toEqual(['a']);
    gates.get('a')!(false);
    expect(await first).toBe('lock lost');
    const next = run(job('a'));
    expect(started).toEqual(['a', 'b', 'a']);
    gates.get('a')!(true);
    gates.get('b')!(true);
    await Promise.all([next, other]);
    expect(again).toEqual(['a']);
  });
});
