import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { errorMessage, type Logger } from '@crawlfleet/core';
import { Heartbeat } from './liveness.js';

/**
 * A readiness check: resolves when the dependency answers, throws (or times out) when it does not.
 * `timeoutMs` overrides the handler's `checkTimeoutMs` for this check alone.
 */
export type ReadinessCheck = { name: string; check: () => Promise<unknown>; timeoutMs?: number };

export interface HealthOptions {
  registry: Registry;
  checks: ReadinessCheck[];
  /** liveness fails when the event loop has stalled this long (LIVENESS_STALL_MS) */
  stallMs: number;
  /** a check that takes longer than this fails */
  checkTimeoutMs?: number;
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise.finally(() => clearTimeout(timer)), new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)))]);
}

/**
 * The handlers of `/metrics`, `/healthz` (liveness: the event loop runs) and `/readyz` (readiness:
 * every dependency answers). Returns false for any other path, so a web framework can go on.
 */
export function healthHandler(options: HealthOptions): { handle(req: IncomingMessage, res: ServerResponse): Promise<boolean>; close(): void } {
  const heartbeat = new Heartbeat();
  // 2 s: a dependency that answers a PING within it is up even on a loaded host; it stays under
  // the probes' own timeouts (3 s in the Kubernetes manifests, 8 s in docker-compose.yml).
  const timeoutMs = options.checkTimeoutMs ?? 2000;
  const json = (res: ServerResponse, status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
  return {
    async handle(req, res) {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      if (path === '/metrics') {
        res.writeHead(200, { 'content-type': options.registry.contentType }).end(await options.registry.metrics());
        return true;
      }
      if (path === '/healthz') {
        const stalledMs = heartbeat.stalledMs();
        json(res, stalledMs > options.stallMs ? 503 : 200, { live: stalledMs <= options.stallMs, eventLoopStalledMs: stalledMs });
        return true;
      }
      if (path === '/readyz') {
        const results = await Promise.all(
          options.checks.map(async ({ name, check, timeoutMs: ownTimeoutMs }) => {
            try {
              await withTimeout(check(), ownTimeoutMs ?? timeoutMs, name);
              return { name, ok: true };
            } catch (err) {
              return { name, ok: false, error: errorMessage(err) };
            }
          }),
        );
        const ready = results.every((r) => r.ok);
        json(res, ready ? 200 : 503, { ready, checks: results });
        return true;
      }
      return false;
    },
    close: () => heartbeat.stop(),
  };
}

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/** A worker's `/metrics`, `/healthz` and `/readyz` on METRICS_HOST:METRICS_PORT. */
export async function startMetricsServer(options: HealthOptions & { host: string; port: number; log: Logger }): Promise<MetricsServer> {
  const handler = healthHandler(options);
  const server: Server = createServer((req, res) => {
    handler.handle(req, res).then(
      (handled) => handled || res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics, /healthz or /readyz\n'),
      (err: unknown) => res.writeHead(500).end(errorMessage(err)),
    );
  });
  const port = await listenOn(server, options.host, options.port);
  options.log.info({ host: options.host, port }, 'serving /metrics, /healthz and /readyz');
  return {
    port,
    async close() {
      handler.close();
      await stopServer(server);
    },
  };
}

/** Listens, and resolves with the port (port 0 picks a free one). */
export async function listenOn(server: Server, host: string, port: number): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

/** Stops accepting, ends idle keep-alive connections, and resolves once closed. */
export async function stopServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
