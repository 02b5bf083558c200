import type { Job } from 'bullmq';
import { oneRunPerJob } from '@crawlfleet/runtime';

const job = (id: string) => ({ id, data: {} }) as unknown as Job;

describe('one run of a job at a time in a process', () => {
  test('a second run of one job starts when the first has ended, even when it failed; another job runs at once', async () => {
    const events: string[] = [];
    const gates = new Map<string, () => void>();
    const waited: string[] = [];
    const run = oneRunPerJob(
      (j) =>
        new Promise<void>((resolve, reject) => {
          const name = `${j.id}#${events.filter((e) => e.startsWith(`start ${j.id}`)).length + 1}`;
          events.push(`start ${name}`);
          gates.set(name, () => (name === 'a#1' ? reject(new Error('lock lost')) : resolve()));
        }).finally(() => events.push(`end ${j.id}`)),
      (j) => waited.push(j.id!),
    );
    const first = run(job('a')).catch((e: Error) => e.message);
    const second = run(job('a'));
    const other = run(job('b'));
    await new Promise((r) => setImmediate(r));
    expect(events).toEqual(['start a#1', 'start b#1']);
    expect(waited).toEqual(['a']);
    gates.get('a#1')!();
    expect(await first).toBe('lock lost');
    await new Promise((r) => setImmediate(r));
    expect(events).toEqual(['start a#1', 'start b#1', 'end a', 'start a#2']);
    gates.get('a#2')!();
    gates.get('b#1')!();
    await Promise.all([second, other]);
    expect(events.slice(4).sort()).toEqual(['end a', 'end b']);
  });
});
