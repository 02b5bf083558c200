import { createServer } from 'node:http';
import express from 'express';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import { STAGES } from '@crawlfleet/core';
import { getStatus, listCrawlIds, type CrawlStatus } from '@crawlfleet/crawl';
import { frontierOf, healthHandler, listenOn, registerCrawlGauges, registerProxyGauges, registerQueueGauges, registerRedisGauges, stopServer } from '@crawlfleet/monitoring';
import { proxyView, readProxyHealth } from '@crawlfleet/politeness';
import type { FleetContext } from '@crawlfleet/runtime';
import { authorized, dashboardAccess } from './access.js';
import { hostRule, refusal } from './host-guard.js';

export { authorized, type BufferCompare, dashboardAccess, isLoopbackHost } from './access.js';
export { hostName, hostRule, isAllowedHost, isAllowedOrigin, refusal, type HostRule } from './host-guard.js';

export interface DashboardOptions {
  host: string;
  port: number;
  /** Bull Board without retry, promote, clean or remove */
  readOnly: boolean;
}

export interface RunningDashboard {
  url: string;
  close(): Promise<void>;
}

/**
 * `crawlfleet dashboard`: Bull Board for the fetch, parse and write queues at `/`, the status objects
 * at `/api/crawls`, the fleet's Prometheus metrics at `/metrics` (queues, crawls, proxies), and
 * `/healthz` and `/readyz`, which alone need no credentials (probes; they tell nothing of the crawls).
 * Every other request must be for a Host the dashboard answers, and a change must come from its own
 * pages (host-guard.ts: DNS rebinding, cross-site requests).
 */
export async function startDashboard(ctx: FleetContext, options: DashboardOptions): Promise<RunningDashboard> {
  const credentials = dashboardAccess(options.host, ctx.env.dashboardUser, ctx.env.dashboardPassword);
  const { registry } = ctx.metrics;
  registerQueueGauges(registry, ctx.queues, frontierOf(ctx.redis, ctx.keys));
  registerCrawlGauges(registry, ctx.redis, ctx.keys, ctx.env.metricsFinishedMs);
  registerRedisGauges(registry, ctx.redis);
  registerProxyGauges(registry, async () => {
    const now = Date.now();
    return (await readProxyHealth(ctx.redis, ctx.keys)).map((h) => proxyView(h, now));
  });
  const health = healthHandler({ registry, stallMs: ctx.env.livenessStallMs, checks: [{ name: 'redis', check: () => ctx.redis.ping() }] });

  const app = express();
  app.disable('x-powered-by');
  app.get(['/healthz', '/readyz'], (req, res, next) => void health.handle(req, res).then((done) => done || next(), next));
  const rule = hostRule(options.host, ctx.env.dashboardAllowedHosts, credentials !== undefined);
  app.use((req, res, next) => {
    const refused = refusal({ method: req.method, host: req.headers.host, origin: req.headers.origin }, rule);
    if (refused === undefined) return next();
    ctx.log.debug({ method: req.method, path: req.path, host: req.headers.host, origin: req.headers.origin }, 'dashboard: request refused (Host or Origin)');
    res.status(403).type('text/plain').send(refused);
  });
  if (credentials) {
    app.use((req, res, next) => {
      if (authorized(req.headers.authorization, credentials)) return next();
      res.set('WWW-Authenticate', 'Basic realm="crawlfleet", charset="UTF-8"').status(401).type('text/plain').send('authentication required\n');
    });
  }
  app.get('/metrics', (req, res, next) => void health.handle(req, res).then((done) => done || next(), next));
  app.get('/api/crawls', (_req, res, next) => {
    crawlStatuses(ctx).then((statuses) => res.json(statuses), next);
  });
  const board = new ExpressAdapter();
  board.setBasePath('/');
  createBullBoard({
    queues: [
      ...STAGES.map((stage) => new BullMQAdapter(ctx.queues[stage], { readOnlyMode: options.readOnly, description: `the ${stage} stage` })),
      new BullMQAdapter(ctx.queues.render, { readOnlyMode: options.readOnly, description: 'the fetch stage in a browser (render)' }),
    ],
    serverAdapter: board,
    options: { uiConfig: { boardTitle: 'crawlfleet' } },
  });
  app.use('/', board.getRouter());

  const server = createServer(app);
  const port = await listenOn(server, options.host, options.port);
  const url = `http://${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}`;
  ctx.log.info({ url, auth: credentials ? 'basic' : 'none (loopback only)', readOnly: options.readOnly }, 'dashboard: Bull Board at /, /api/crawls, /metrics, /healthz, /readyz');
  return {
    url,
    async close() {
      health.close();
      await stopServer(server);
    },
  };
}

/** Every crawl's status object, as `status --json` prints them. */
async function crawlStatuses(ctx: FleetContext): Promise<CrawlStatus[]> {
  const found = await Promise.all((await listCrawlIds(ctx.redis, ctx.keys)).map((id) => getStatus(ctx.redis, ctx.keys, id)));
  return found.filter((s): s is CrawlStatus => s !== undefined);
}
