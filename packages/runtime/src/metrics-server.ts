import { frontierOf, registerQueueGauges, startMetricsServer, type MetricsServer, type ReadinessCheck } from '@crawlfleet/monitoring';

export type { ReadinessCheck };
export { registerSessionGauge } from '@crawlfleet/monitoring';
import type { Queues } from '@crawlfleet/core';
import type { FleetContext } from './context.js';

/**
 * When METRICS_PORT is set: this process's metrics, the backlog of the queues it serves (what
 * autoscaling reads), liveness, and readiness (Redis answers, plus the checks given).
 */
export async function serveMetrics(ctx: FleetContext, stages: readonly (keyof Queues)[], checks: ReadinessCheck[] = []): Promise<MetricsServer | undefined> {
  const { metricsPort, metricsHost, livenessStallMs } = ctx.env;
  if (metricsPort === undefined) return undefined;
  registerQueueGauges(ctx.metrics.registry, Object.fromEntries(stages.map((s) => [s, ctx.queues[s]])), frontierOf(ctx.redis, ctx.keys));
  return startMetricsServer({
    host: metricsHost,
    port: metricsPort,
    log: ctx.log,
    registry: ctx.metrics.registry,
    stallMs: livenessStallMs,
    checks: [{ name: 'redis', check: () => ctx.redis.ping() }, ...checks],
  });
}
