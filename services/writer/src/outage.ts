import { redactUrl, retryDelay, type Logger, type SinkSpec } from '@crawlfleet/core';

/** The longest a write job stays parked before it tries an unavailable store again. */
export const MAX_OUTAGE_WAIT_MS = 30_000;

/**
 * Pure: how long a write job that found its store unavailable stays parked (BullMQ's delayed set)
 * before it tries again. It grows with the times this job was parked before, from about a second to
 * MAX_OUTAGE_WAIT_MS, so a long outage costs a job one try every 15-30 s and nothing else; jittered,
 * so parked jobs do not all come back at once. `random` is injected for tests.
 */
export function outageWaitMs(deferrals: number, random?: () => number): number {
  return retryDelay(deferrals + 1, undefined, { baseMs: 1000, maxMs: MAX_OUTAGE_WAIT_MS, ...(random ? { random } : {}) });
}

/** Pure: the name of a crawl's store in logs and metrics: the MongoDB URL without credentials, or the file. */
export function sinkLabel(spec: SinkSpec, mongoUrl: string): string {
  return spec.kind === 'mongo' ? redactUrl(spec.url ?? mongoUrl) : spec.path;
}

/** Pure: the name of a store kind in a log line. */
const storeName = (label: string) => (label.startsWith('mongodb') ? 'MongoDB' : 'the item store');

/**
 * Which stores this writer currently finds unavailable, so an outage is logged once when it starts
 * and once when it ends, however many jobs are parked meanwhile and however long it lasts.
 */
export class SinkOutages {
  private readonly down = new Map<string, { since: number; parked: number }>();

  constructor(
    private readonly log: Logger,
    /** told the number of unavailable stores on every change (a gauge) */
    private readonly onChange: (unavailable: number) => void = () => undefined,
  ) {}

  /** A job found `label` unavailable and is parked for `waitMs`. */
  unavailable(label: string, err: unknown, waitMs: number): void {
    const state = this.down.get(label);
    if (state) {
      state.parked++;
      return;
    }
    this.down.set(label, { since: Date.now(), parked: 1 });
    this.onChange(this.down.size);
    const e = err as { name?: string; message?: string };
    this.log.warn({ sink: label, err: { name: e?.name, message: e?.message }, retryInMs: waitMs }, `${storeName(label)} unavailable: write jobs are parked without spending attempts until it answers`);
  }

  /** A job's items were stored in `label`. */
  available(label: string): void {
    const state = this.down.get(label);
    if (!state) return;
    this.down.delete(label);
    this.onChange(this.down.size);
    this.log.info({ sink: label, unavailableForMs: Date.now() - state.since, parkings: state.parked }, `${storeName(label)} available again: parked write jobs resume`);
  }
}
