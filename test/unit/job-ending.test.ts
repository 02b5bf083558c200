import { DelayedError, UnrecoverableError } from 'bullmq';
import { NonRetryableError, RetryableError, SpiderVersionPending, StaleRunError } from '@crawlfleet/core';
import { DeferError, GiveUpError, HandlerDeadlineError, endingOfBegin, endingOfError, endingOfResult } from '@crawlfleet/runtime';

// The pure decisions of how a stage's job ends (job-ending.ts); end-job.ts runs what each takes.
describe('endingOfBegin: how a job ends before its handler runs', () => {
  test.each([
    ['running', undefined],
    ['early', { kind: 'early' }],
    ['paused', { kind: 'parked' }],
    ['unknown', { kind: 'dropped', why: 'unknown' }],
    ['finished', { kind: 'dropped', why: 'finished' }],
    ['done', { kind: 'dropped', why: 'done' }],
    ['cancelled', { kind: 'abandoned' }],
    ['failed', { kind: 'abandoned' }],
    ['a state this worker does not know yet', { kind: 'abandoned' }],
  ] as const)('%s', (state, ending) => {
    expect(endingOfBegin(state as Parameters<typeof endingOfBegin>[0])).toEqual(ending);
  });
});

describe('endingOfResult', () => {
  test('a result is done, with its effects', () => {
    const result = { counters: { fetched: 1 } };
    expect(endingOfResult(result)).toEqual({ kind: 'done', result });
  });
  test('a result asking for a browser is rerouted, and finishes nothing', () => {
    expect(endingOfResult({ reroute: 'render', counters: { fetched: 1 } })).toEqual({ kind: 'rerouted' });
  });
});

describe('endingOfError: how a job ends when its run threw', () => {
  test('a job the handler moved itself stays moved', () => {
    const err = new DelayedError();
    const ending = endingOfError(err, 0, 3);
    expect(ending).toEqual({ kind: 'moved', error: err });
    expect((ending as { error: unknown }).error).toBe(err);
  });
  test('a reset under the job drops it, with the reason', () => {
    const err = new StaleRunError('c1', '2026-01-01');
    expect(endingOfError(err, 0, 3)).toEqual({ kind: 'dropped', why: 'stale', message: err.message });
  });
  test('a deferral and a spider version not deployed yet wait, on their last attempt too, spending none', () => {
    expect(endingOfError(new DeferError(250, 'host busy'), 2, 3)).toEqual({ kind: 'deferred', waitMs: 250 });
    expect(endingOfError(new SpiderVersionPending('not yet', 5000), 0, 1)).toEqual({ kind: 'deferred', waitMs: 5000 });
  });
  test('a retryable failure is retried while attempts remain, then dead-lettered with its code', () => {
    const err = new RetryableError('ERR_TIMEOUT', 'timed out');
    expect(endingOfError(err, 0, 3)).toEqual({ kind: 'retried', error: err });
    expect(endingOfError(err, 1, 3)).toEqual({ kind: 'retried', error: err });
    expect(endingOfError(err, 2, 3)).toEqual({ kind: 'dead', code: 'ERR_TIMEOUT', reason: 'timed out', result: {} });
  });
  test('an error of no kind is retried too, and dead-lettered as ERR_UNEXPECTED at the end', () => {
    const err = new Error('boom');
    expect(endingOfError(err, 0, 2)).toEqual({ kind: 'retried', error: err });
    expect(endingOfError(err, 1, 2)).toEqual({ kind: 'dead', code: 'ERR_UNEXPECTED', reason: 'boom', result: {} });
  });
  test('a non-retryable failure is dead-lettered on its first attempt', () => {
    expect(endingOfError(new NonRetryableError('ERR_BLOCKED', 'blocked'), 0, 5)).toEqual({ kind: 'dead', code: 'ERR_BLOCKED', reason: 'blocked', result: {} });
    expect(endingOfError(new NonRetryableError('ERR_BLOCKED', 'blocked'), 4, 5)).toEqual({ kind: 'dead', code: 'ERR_BLOCKED', reason: 'blocked', result: {} });
  });
  test("BullMQ's UnrecoverableError from a handler is dead-lettered at once: BullMQ would not retry it", () => {
    expect(endingOfError(new UnrecoverableError('no'), 0, 5)).toEqual({ kind: 'dead', code: 'ERR_UNEXPECTED', reason: 'no', result: {} });
  });
  test("a handler past its deadline is retried like any failure, and dead-lettered with the deadline's code on its last attempt", () => {
    const err = new HandlerDeadlineError('fetch', 1000, 'http://h/');
    expect(endingOfError(err, 0, 2)).toEqual({ kind: 'retried', error: err });
    expect(endingOfError(err, 1, 2)).toMatchObject({ kind: 'dead', code: err.code });
  });
  test('a thrown string is retried, then dead-lettered as ERR_UNEXPECTED with the string as its reason', () => {
    expect(endingOfError('odd', 0, 2)).toEqual({ kind: 'retried', error: 'odd' });
    expect(endingOfError('odd', 1, 2)).toEqual({ kind: 'dead', code: 'ERR_UNEXPECTED', reason: 'odd', result: {} });
  });
  test('a give-up keeps its effects and its hand-over for the dead letter', () => {
    const handOver = { stage: 'write' as const, id: 'w1', data: { crawlId: 'c', url: 'http://h/x', items: [] }, opts: {} };
    const result = { counters: { fetched: 1 }, handOver } as unknown as ConstructorParameters<typeof GiveUpError>[2];
    expect(endingOfError(new GiveUpError('ERR_HTTP_STATUS', 'HTTP 404', result), 0, 3)).toEqual({ kind: 'dead', code: 'ERR_HTTP_STATUS', reason: 'HTTP 404', result });
  });
});
