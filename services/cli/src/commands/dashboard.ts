import { dashboardAccess, startDashboard } from '@crawlfleet/dashboard';
import { createFleetContext, onShutdownSignal } from '@crawlfleet/runtime';
import { envWith } from '../options.js';

/** Serves the dashboard until SIGTERM or SIGINT. A non-loopback bind without credentials exits 2. */
export async function dashboardCommand(options: { port: number; host: string; readOnly?: boolean; redis?: string }): Promise<number> {
  const env = envWith(options);
  // Refuse an open bind before anything else happens.
  dashboardAccess(options.host, env.dashboardUser, env.dashboardPassword);
  const ctx = await createFleetContext({ env, name: 'dashboard', waitForRedis: true });
  try {
    const dashboard = await startDashboard(ctx, { host: options.host, port: options.port, readOnly: options.readOnly === true });
    onShutdownSignal(
      ctx.log,
      async () => {
        await dashboard.close();
        await ctx.close();
      },
      { drainMs: env.shutdownDrainMs },
    );
  } catch (err) {
    await ctx.close();
    throw err;
  }
  return new Promise<number>(() => undefined);
}
