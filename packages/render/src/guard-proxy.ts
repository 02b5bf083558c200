import type { LookupAddress } from 'node:dns';
import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { ForbiddenAddressError, assertUrlAddressAllowed, guardLookup, makeLookup, type AddressPolicy, type Lookup } from '@crawlfleet/fetch';
import { HOP_BY_HOP, relayedHead } from './relay-head.js';
import { RefusalLog, type RefusalSummary } from './refusal-log.js';

export interface GuardProxyOptions {
  /**
   * The longest an upstream request may take, and a tunnel may sit idle (the spider's timeouts);
   * connecting gets min(10 s, it), as the fetcher's requests do. 30 s by default.
   */
  timeoutMs?: number;
  /** The resolver under the guard instead of DNS and HOST_RESOLVE (its answers are vetted all the same). */
  resolve?: Lookup;
  /** Told, at most once a window and when the proxy closes, of refusals that got no line of their own. */
  onRefusalSummary?: (summary: RefusalSummary) => void;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const MAX_CONNECT_MS = 10_000;
/** how long an idle upstream connection is kept for reuse (Node's global agent keeps 5 s) */
const IDLE_UPSTREAM_MS = 4_000;

/**
 * An HTTP proxy on loopback that a browser sends all its traffic through: every request, the
 * page's own, its scripts', XHR and fetch, frames, WebSocket and CONNECT tunnels, reaches only an
 * address the SSRF guard allows. The name is resolved here (HOST_RESOLVE first), every answer is
 * vetted, and the connection goes to the vetted address, so DNS rebinding changes nothing. A refused
 * request gets a 403 and never a socket to its target.
 *
 * Nothing a site or the browser does takes it down or makes it hold a connection: a site's answer
 * that cannot be relayed is a 502 (relayedHead), a client that leaves (even while its name is
 * resolving) takes its upstream with it, upstream requests and tunnels have deadlines, and what it
 * remembers and logs of refusals is bounded (RefusalLog).
 */
export class GuardProxy {
  private readonly server: http.Server;
  private readonly lookup: Lookup | undefined;
  /** its own pool of upstream connections, so that close() ends them all */
  private readonly agent: http.Agent;
  /** both sides of every tunnel, so that close() ends them all */
  private readonly tunnels = new Set<Duplex>();
  private readonly refusalLog = new RefusalLog();
  private summaryTimer: NodeJS.Timeout | undefined;
  private readonly timeoutMs: number;
  private closed = false;

  private constructor(
    private readonly policy: AddressPolicy,
    overrides: ReadonlyMap<string, string>,
    private readonly onRefused: (target: string, reason: string) => void,
    private readonly options: GuardProxyOptions,
  ) {
    this.lookup = options.resolve ? (policy.allowPrivate ? options.resolve : guardLookup(options.resolve, policy)) : makeLookup(overrides, policy);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    // Idle upstream connections are dropped before a site's keep-alive timeout drops them (Node's
    // servers: 5 s): a pooled connection the site closes just as it is reused is a reset, a 502.
    this.agent = new http.Agent({ keepAlive: true, timeout: Math.min(IDLE_UPSTREAM_MS, this.timeoutMs) });
    this.server = http.createServer((req, res) => this.guarded(this.forward(req, res), () => failResponse(res, 502)));
    this.server.on('connect', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => this.guarded(this.tunnel(req, socket, head, false), () => socket.destroy()));
    // A WebSocket over plain ws:// comes as an upgrade of a proxied request: tunnelled the same way.
    this.server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => this.guarded(this.tunnel(req, socket, head, true), () => socket.destroy()));
    this.server.on('clientError', (_err, socket) => socket.destroy());
  }

  static async start(
    policy: AddressPolicy,
    overrides: ReadonlyMap<string, string>,
    onRefused: (target: string, reason: string) => void = () => undefined,
    options: GuardProxyOptions = {},
  ): Promise<GuardProxy> {
    const proxy = new GuardProxy(policy, overrides, onRefused, options);
    await new Promise<void>((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  /** Refusals since the start, and the distinct targets remembered (bounded). */
  get refusals(): { total: number; targetsKept: number } {
    return { total: this.refusalLog.total, targetsKept: this.refusalLog.size };
  }

  /** The browser's connections to the proxy now open. */
  clientConnections(): Promise<number> {
    return new Promise((resolve) => this.server.getConnections((_err, count) => resolve(count)));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.summaryTimer);
    this.reportSummary(Number.POSITIVE_INFINITY);
    this.server.closeAllConnections();
    for (const socket of this.tunnels) socket.destroy();
    this.agent.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /**
   * The address a request to `host` may connect to, or the reason it may not: `forbidden` when the
   * guard refuses the address (the name resolved, or is, a forbidden one), not when it did not resolve.
   */
  async vet(host: string, port: number): Promise<{ address: string } | { refused: string; forbidden?: ForbiddenAddressError }> {
    const bare = host.replace(/^\[|\]$/g, '');
    try {
      assertUrlAddressAllowed(new URL(`http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}/`), this.policy);
    } catch (err) {
      return { refused: (err as Error).message, ...(err instanceof ForbiddenAddressError ? { forbidden: err } : {}) };
    }
    const lookup = this.lookup;
    if (!lookup) return { address: bare };
    return new Promise((resolve) => {
      lookup(bare, { all: true }, (err, answers) => {
        if (err instanceof ForbiddenAddressError) resolve({ refused: err.message, forbidden: err });
        else if (err || !Array.isArray(answers) || answers.length === 0) resolve({ refused: `${host}: ${err?.message ?? 'no address'}` });
        else resolve({ address: (answers as LookupAddress[])[0]!.address });
      });
    });
  }

  /** A handler's promise, whose failure ends its exchange instead of the process (an unhandled rejection exits Node). */
  private guarded(work: Promise<void>, fail: () => void): void {
    work.catch(() => {
      try {
        fail();
      } catch {
        // the exchange is gone already
      }
    });
  }

  private refuse(target: string, reason: string): void {
    const { log, summary } = this.refusalLog.note(target, Date.now());
    if (summary) this.options.onRefusalSummary?.(summary);
    if (log) this.onRefused(target, reason);
    this.scheduleSummary();
  }

  /** A timer for the window's summary, so that a burst of refusals followed by silence is still reported. */
  private scheduleSummary(): void {
    const due = this.refusalLog.pendingUntil();
    if (due === undefined || this.summaryTimer !== undefined || this.closed) return;
    this.summaryTimer = setTimeout(
      () => {
        this.summaryTimer = undefined;
        this.reportSummary(Date.now());
      },
      Math.max(0, due - Date.now()),
    ).unref();
  }

  private reportSummary(now: number): void {
    const summary = this.refusalLog.flush(now);
    if (summary) this.options.onRefusalSummary?.(summary);
  }

  private async forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    res.on('error', () => undefined);
    // The browser may leave at any point, even while its target's name resolves: from then on
    // nothing is opened for it, and what was opened is closed.
    const client = new AbortController();
    res.on('close', () => client.abort());
    const url = forwardTarget(req.url);
    if (!url) return void res.writeHead(400).end();
    const port = Number(url.port || 80);
    const verdict = await this.vet(url.hostname, port);
    if (client.signal.aborted) return;
    if ('refused' in verdict) {
      this.refuse(`${url.hostname}:${port}`, verdict.refused);
      return void res.writeHead(403, { 'content-type': 'text/plain' }).end('refused by the SSRF guard\n');
    }
    const deadline = AbortSignal.timeout(this.timeoutMs);
    const upstream = http.request({
      host: verdict.address,
      port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers: forwardedHeaders(req),
      setHost: false,
      agent: this.agent,
      signal: AbortSignal.any([client.signal, deadline]),
    });
    upstream.on('socket', (socket) => connectDeadline(socket, Math.min(MAX_CONNECT_MS, this.timeoutMs)));
    upstream.on('response', (answer) => {
      try {
        relay(answer, res);
      } catch {
        answer.destroy();
        failResponse(res, 502);
      }
    });
    // A 101 to a request that asked for no upgrade: Node would drop the socket and say nothing.
    upstream.on('upgrade', (_answer, socket: Duplex) => {
      socket.destroy();
      failResponse(res, 502);
    });
    upstream.on('error', () => failResponse(res, deadline.aborted ? 504 : 502));
    req.pipe(upstream);
  }

  /**
   * A CONNECT tunnel, or (`upgrade`) a plain ws:// WebSocket whose request is written again to the
   * vetted address: bytes both ways once connected, until either side closes or the tunnel has been
   * idle for the timeout.
   */
  private async tunnel(req: http.IncomingMessage, socket: Duplex, head: Buffer, upgrade: boolean): Promise<void> {
    socket.on('error', () => socket.destroy());
    this.tunnels.add(socket);
    socket.on('close', () => this.tunnels.delete(socket));
    // Read the browser's side from now on, or its leaving goes unseen until the tunnel opens (a
    // paused socket never reads the FIN): what it sends early is kept for the site, within bounds.
    const early = earlyBytes(socket, head);
    const target = upgrade ? upgradeTarget(req.url) : connectTarget(req.url);
    if (!target) return void socket.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n');
    const verdict = await this.vet(target.host, target.port);
    if (early.gone()) return void socket.destroy();
    if ('refused' in verdict) {
      this.refuse(`${target.host}:${target.port}`, verdict.refused);
      return void socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
    }
    const upstream = net.connect(target.port, verdict.address);
    this.tunnels.add(upstream);
    let established = false;
    const closeBoth = () => {
      upstream.destroy();
      socket.destroy();
    };
    socket.on('close', closeBoth);
    upstream.on('close', () => {
      this.tunnels.delete(upstream);
      // Before the tunnel is up, failTunnel answers the browser; after, the browser's side goes too.
      if (established || upgrade) closeBoth();
    });
    // Connecting gets min(10 s, timeout); once connected, no byte either way for the timeout closes both sides.
    upstream.setTimeout(Math.min(MAX_CONNECT_MS, this.timeoutMs));
    upstream.on('timeout', () => (established || upgrade ? closeBoth() : failTunnel(socket, upstream, 504)));
    upstream.on('error', () => (established || upgrade ? closeBoth() : failTunnel(socket, upstream, 502)));
    upstream.on('connect', () => {
      established = true;
      upstream.setTimeout(this.timeoutMs);
      if (upgrade) upstream.write(upgradeHead(req, target.path));
      else socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      for (const chunk of early.take()) upstream.write(chunk);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
  }
}

/** Bytes a browser may send before its tunnel is open (a TLS ClientHello sent early); more is an abuse, and ends it. */
const MAX_EARLY_BYTES = 64 * 1024;

/**
 * Reads a tunnel's client side until the tunnel opens: keeps what arrives (`take` hands it over
 * and stops reading), and says whether the client has gone (closed, or ended its side).
 */
function earlyBytes(socket: Duplex, head: Buffer): { gone(): boolean; take(): Buffer[] } {
  const chunks = head.length > 0 ? [head] : [];
  let size = head.length;
  let gone = false;
  const onData = (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.length;
    if (size > MAX_EARLY_BYTES) socket.destroy();
  };
  // The client ending its side before its tunnel is open has left (the server socket is half-open: close it).
  const onEnd = () => {
    gone = true;
    socket.destroy();
  };
  socket.on('data', onData);
  socket.once('end', onEnd);
  socket.once('close', () => (gone = true));
  socket.resume();
  return {
    gone: () => gone || socket.destroyed,
    take: () => {
      socket.off('data', onData);
      socket.off('end', onEnd);
      return chunks.splice(0);
    },
  };
}

/** Pure: the URL of a proxied plain-http request, or undefined when it is none (a 400). */
export function forwardTarget(requestUrl: string | undefined): URL | undefined {
  const url = URL.parse(requestUrl ?? '');
  return url?.protocol === 'http:' && validPort(Number(url.port || 80)) ? url : undefined;
}

/** Pure: `host:port` of a CONNECT request (IPv6 in brackets), or undefined when it is none (a 400). */
export function connectTarget(requestUrl: string | undefined): { host: string; port: number; path: string } | undefined {
  const match = /^(\[[^\]]+\]|[^:/\s]+):(\d{1,5})$/.exec(requestUrl ?? '');
  if (!match || !validPort(Number(match[2]))) return undefined;
  return { host: match[1]!, port: Number(match[2]), path: '' };
}

/** Pure: where a proxied ws:// upgrade goes, or undefined when its URL is none (a 400). */
export function upgradeTarget(requestUrl: string | undefined): { host: string; port: number; path: string } | undefined {
  const url = URL.parse(requestUrl ?? '');
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'ws:')) return undefined;
  const port = Number(url.port || 80);
  return validPort(port) ? { host: url.hostname, port, path: `${url.pathname}${url.search}` } : undefined;
}

function validPort(port: number): boolean {
  return Number.isInteger(port) && port >= 1 && port <= 65535;
}

/** The browser's request headers as sent on: without hop-by-hop ones, and with a Via (RFC 9110 7.6.3). */
function forwardedHeaders(req: http.IncomingMessage): http.OutgoingHttpHeaders {
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
  // A proxy says so: the site can tell a rendering browser's requests.
  headers.via = `${req.headers.via ? `${req.headers.via}, ` : ''}1.1 crawlfleet-render`;
  return headers;
}

/** The upgrade request as the site gets it: the browser's head without its proxy headers. */
function upgradeHead(req: http.IncomingMessage, path: string): string {
  const lines = [`${req.method} ${path} HTTP/1.1`];
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (!/^proxy-/i.test(req.rawHeaders[i]!)) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** The site's answer passed to the browser, or a 502 when it cannot be (relayedHead). */
function relay(answer: http.IncomingMessage, res: http.ServerResponse): void {
  const head = relayedHead(answer.statusCode, answer.statusMessage, answer.headers);
  if ('invalid' in head) {
    answer.destroy();
    failResponse(res, 502);
    return;
  }
  if (head.message === undefined) res.writeHead(head.status, head.headers);
  else res.writeHead(head.status, head.message, head.headers);
  answer.on('error', () => res.destroy());
  answer.pipe(res);
}

/** An exchange that failed: its status when nothing was sent yet, else the connection cut (the browser sees a truncated answer). */
function failResponse(res: http.ServerResponse, status: 502 | 504): void {
  if (res.writableEnded) return;
  if (res.headersSent || res.destroyed) res.destroy();
  else res.writeHead(status, { 'content-type': 'text/plain', connection: 'close' }).end(`${http.STATUS_CODES[status]}\n`);
}

/** A CONNECT whose upstream failed or timed out before the tunnel was established: the browser is told why. */
function failTunnel(socket: Duplex, upstream: net.Socket, status: 502 | 504): void {
  upstream.destroy();
  socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-length: 0\r\n\r\n`);
}

/** An upstream socket that must connect within `ms` (the whole request's deadline covers the rest). */
function connectDeadline(socket: net.Socket, ms: number): void {
  if (!socket.connecting) return;
  const timer = setTimeout(() => socket.destroy(new Error(`no connection within ${ms} ms`)), ms);
  socket.once('connect', () => clearTimeout(timer));
  socket.once('close', () => clearTimeout(timer));
}
