/**
 * Gathers items from many concurrent callers and flushes them together when `maxItems` have gathered
 * or `maxWaitMs` have passed, whichever comes first. Each caller's promise settles with the flush
 * that holds its items, so a job is acknowledged only after its items are stored. Flushes run one at
 * a time, in order.
 */
export interface BatcherOptions {
  maxItems: number;
  maxWaitMs: number;
  /** told of each batch stored: its size and how long the flush took, retries included (metrics) */
  onFlush?: (items: number, seconds: number) => void;
}

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
  /** where this caller's items sit in the batch */
  from: number;
  to: number;
}

/** Some items of one caller were refused by the store; the rest of the batch was stored. */
export class ItemsRejectedError extends Error {
  readonly code = 'ERR_ITEM_REJECTED';
  constructor(readonly reasons: string[]) {
    super(`the store refused ${reasons.length} item(s): ${reasons.join('; ')}`);
  }
}

/** What a flush says of each item: undefined when stored, else why it was refused. */
// biome-ignore lint/suspicious/noConfusingVoidType: void lets a flush that stored everything be a plain Promise<void> function (FileSink's)
export type FlushOutcome = void | (string | undefined)[];

export class Batcher<T> {
  private buffer: T[] = [];
  private waiters: Waiter[] = [];
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly flushBatch: (batch: T[]) => Promise<FlushOutcome>,
    private readonly options: BatcherOptions,
  ) {}

  add(items: T[]): Promise<void> {
    const from = this.buffer.length;
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject, from, to: from + items.length }));
    this.buffer.push(...items);
    if (this.buffer.length >= this.options.maxItems) this.flushNow();
    else this.timer ??= setTimeout(() => this.flushNow(), this.options.maxWaitMs);
    return done;
  }

  /** Flushes whatever has gathered; resolves when every flush so far has settled. */
  async drain(): Promise<void> {
    if (this.buffer.length > 0) this.flushNow();
    await this.chain.catch(() => undefined);
  }

  private flushNow(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.buffer;
    const waiters = this.waiters;
    this.buffer = [];
    this.waiters = [];
    this.chain = this.chain.then(async () => {
      try {
        const started = performance.now();
        const outcome = await this.flushBatch(batch);
        this.options.onFlush?.(batch.length, (performance.now() - started) / 1000);
        for (const w of waiters) {
          const refused = outcome ? outcome.slice(w.from, w.to).filter((r): r is string => r !== undefined) : [];
          if (refused.length > 0) w.reject(new ItemsRejectedError(refused));
          else w.resolve();
        }
      } catch (err) {
        for (const w of waiters) w.reject(err);
      }
    });
  }
}
