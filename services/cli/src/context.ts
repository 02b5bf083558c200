import type { Env } from '@crawlfleet/core';
import { createFleetContext, type FleetContext, type FleetContextOptions } from '@crawlfleet/runtime';

/** Runs a command with a fleet context, always closing it (a short command's connects fails fast). */
export async function withContext<T>(env: Env, fn: (ctx: FleetContext) => Promise<T>, options: Omit<FleetContextOptions, 'env'> = {}): Promise<T> {
  const ctx = await createFleetContext({ ...options, env });
  try {
    return await fn(ctx);
  } finally {
    await ctx.close();
  }
}
