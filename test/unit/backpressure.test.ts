import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Keys } from '@crawlfleet/core';
import { parkedJobs } from '@crawlfleet/crawl';
import { backlogDepth, backpressureAction, watchBackpressure } from '@crawlfleet/runtime';
import { REDIS_URL, dropPrefix, uniquePrefix, waitFor } from '../helpers/cli.js';

describe('backpressure', () => {
  test('the backlog is waiting, delayed and prioritized jobs; pause over the high-water mark, resume at half of it', () => {
    expect(backlogDepth({ waiting: 2, delayed: 5, prioritized: 1, active: 7, completed: 100, failed: 3 })).toBe(8);
    expect(backlogDepth({})).toBe(0);
    expect(backpressureAction(false, 11, 10)).toBe('pause');
    expect(backpressureAction(false, 10, 10)).toBe('none');
    expect(backpressureAction(true, 6, 10)).toBe('none');
    expect(backpressureAction(true, 5, 10)).toBe('resume');
    expect(backpressureAction(true, 50, 10)).toBe('none');
  });

  test('delayed jobs in the downstream queue (parked write jobs) pause the upstream worker; it resumes once they drain (real Redis and BullMQ)', async () => {
    const prefix = uniquePrefix('backpressure');
    const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    const downstream = new Queue('write', { connection, prefix: `${prefix}:write` });
    const upstream = new Worker('parse', async () => undefined, { connection: connection.duplicate(), prefix: `${prefix}:parse` });
    const stop = watchBackpressure(upstream, downstream, 4, pino({ level: 'silent' }), 50);
    try {
      await upstream.waitUntilReady();
      // Nothing waits: all five are parked in the delayed set, as a writer parks them while MongoDB is down.
      await downstream.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'write', data: { i }, opts: { jobId: `j${i}`, delay: 3_600_000 } })));
      expect(await downstream.getWaitingCount()).toBe(0);
      expect(await downstream.getDelayedCount()).toBe(5);
      await waitFor(async () => upstream.isPaused(), 10_000, 'the upstream worker to pause');
      // Three left (over half of 4): still paused; two left: resumed.
      await downstream.remove('j0');
      await downstream.remove('j1');
      await new Promise((r) => setTimeout(r, 300));
      expect(upstream.isPaused()).toBe(true);
      await downstream.remove('j2');
      await waitFor(async () => !upstream.isPaused(), 10_000, 'the upstream worker to resume');
    } finally {
      stop();
      await upstream.close();
      await downstream.close();
      connection.disconnect();
      await dropPrefix(prefix);
    }
  });

  test("a paused crawl's parked jobs do not count: they wait for its resume, and must not hold back every other crawl's intake", async () => {
    const prefix = uniquePrefix('backpressure-parked');
    const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    const keys = new Keys(prefix);
    const downstream = new Queue('write', { connection, prefix: keys.queuePrefix('write') });
    const upstream = new Worker('parse', async () => undefined, { connection: connection.duplicate(), prefix: keys.queuePrefix('parse') });
    const stop = watchBackpressure(upstream, downstream, 4, pino({ level: 'silent' }), 50, () => parkedJobs(connection, keys, 'write'));
    try {
      await upstream.waitUntilReady();
      // Six write jobs parked by a paused crawl, one waiting job of a running one.
      await connection
        .multi()
        .sadd(keys.crawlIndex(), 'paused-one', 'running-one')
        .hset(keys.crawl('paused-one').meta, 'state', 'paused', 'parts', '1')
        .hset(keys.crawl('running-one').meta, 'state', 'running', 'parts', '1')
        .exec();
      await connection.sadd(keys.part('paused-one', 0, 1).parked.write, ...Array.from({ length: 6 }, (_, i) => `w${i}`));
      await downstream.addBulk(Array.from({ length: 6 }, (_, i) => ({ name: 'write', data: { i }, opts: { jobId: `w${i}`, delay: 24 * 3_600_000 } })));
      await downstream.add('write', {}, { jobId: 'other' });
      expect(await parkedJobs(connection, keys, 'write')).toBe(6);
      await new Promise((r) => setTimeout(r, 500));
      expect(upstream.isPaused()).toBe(false);
      // Resumed, its six count again (and pause the intake until they drain).
      await connection.hset(keys.crawl('paused-one').meta, 'state', 'running');
      await waitFor(async () => upstream.isPaused(), 10_000, 'the upstream worker to pause');
    } finally {
      stop();
      await upstream.close();
      await downstream.close();
      connection.disconnect();
      await dropPrefix(prefix);
    }
  });
});
