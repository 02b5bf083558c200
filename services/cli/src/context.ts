import type { Env } from '@crawlfleet/core';
import { createFleetContext, type FleetContext } from '@crawlfleet/runtime';

/** Runs a short command with a fleet context, always closing it. */
export async function withContext<T>(env: Env, fn: (ctx: FleetContext) => Promise<T>): Promise<T> {
  const ctx = await createFleetContext({ env });
  try {
    return await fn(ctx);
  } finally {
    await ctx.close();
  }
}
