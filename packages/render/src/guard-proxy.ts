import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { ForbiddenAddressError, assertUrlAddressAllowed, makeLookup, type AddressPolicy, type Lookup } from '@crawlfleet/fetch';
import type { LookupAddress } from 'node:dns';

/** Hop-by-hop headers a proxy does not pass on (RFC 9110 7.6.1), and the proxy's own. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/**
 * An HTTP proxy on loopback that a browser sends all its traffic through: every request, the
 * page's own, its scripts', XHR and fetch, frames, WebSocket and CONNECT tunnels, reaches only an
 * address the SSRF guard allows. The name is resolved here (HOST_RESOLVE first), every answer is
 * vetted, and the connection goes to the vetted address, so DNS rebinding changes nothing. A refused
 * request gets a 403 and never a socket to its target.
 */
export class GuardProxy {
  /** requests refused, by `host:port`, for the logs and the tests */
  readonly refused: string[] = [];
  private readonly server: http.Server;
  private readonly lookup: Lookup | undefined;

  private constructor(
    private readonly policy: AddressPolicy,
    overrides: ReadonlyMap<string, string>,
    private readonly onRefused: (target: string, reason: string) => void,
  ) {
    this.lookup = makeLookup(overrides, policy);
    this.server = http.createServer((req, res) => void this.forward(req, res));
    this.server.on('connect', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void this.tunnel(req, socket, head));
    // A WebSocket over plain ws:// comes as an upgrade of a proxied request: tunnelled the same way.
    this.server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void this.upgrade(req, socket, head));
    this.server.on('clientError', (_err, socket) => socket.destroy());
  }

  static async start(policy: AddressPolicy, overrides: ReadonlyMap<string, string>, onRefused: (target: string, reason: string) => void = () => undefined): Promise<GuardProxy> {
    const proxy = new GuardProxy(policy, overrides, onRefused);
    await new Promise<void>((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
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
        else if (err) resolve({ refused: `${host}: ${err.message}` });
        else resolve({ address: (answers as LookupAddress[])[0]!.address });
      });
    });
  }

  private refuse(target: string, reason: string): void {
    this.refused.push(target);
    this.onRefused(target, reason);
  }

  private async forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      res.writeHead(400).end();
      return;
    }
    if (url.protocol !== 'http:') {
      res.writeHead(400).end();
      return;
    }
    const port = Number(url.port || 80);
    const verdict = await this.vet(url.hostname, port);
    if ('refused' in verdict) {
      this.refuse(`${url.hostname}:${port}`, verdict.refused);
      res.writeHead(403, { 'content-type': 'text/plain' }).end('refused by the SSRF guard\n');
      return;
    }
    const headers: http.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
    // A proxy says so (RFC 9110 7.6.3): the site can tell a rendering browser's requests.
    headers.via = `${req.headers.via ? `${req.headers.via}, ` : ''}1.1 crawlfleet-render`;
    const upstream = http.request({ host: verdict.address, port, method: req.method, path: `${url.pathname}${url.search}`, headers, setHost: false }, (answer) => {
      const back: http.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(answer.headers)) if (!HOP_BY_HOP.has(name) && value !== undefined) back[name] = value;
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, back);
      answer.pipe(res);
    });
    upstream.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  }

  private async tunnel(req: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(req.url ?? '');
    if (!match) {
      socket.end('HTTP/1.1 400 Bad Request\r\n\r\n');
      return;
    }
    const [, host, port] = match as unknown as [string, string, string];
    const verdict = await this.vet(host, Number(port));
    if ('refused' in verdict) {
      this.refuse(`${host}:${port}`, verdict.refused);
      socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    const upstream = net.connect(Number(port), verdict.address, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on('error', () => socket.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n'));
    socket.on('close', () => upstream.destroy());
  }

  private async upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      socket.end('HTTP/1.1 400 Bad Request\r\n\r\n');
      return;
    }
    const port = Number(url.port || 80);
    const verdict = await this.vet(url.hostname, port);
    if ('refused' in verdict) {
      this.refuse(`${url.hostname}:${port}`, verdict.refused);
      socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    const upstream = net.connect(port, verdict.address, () => {
      const lines = [`${req.method} ${url.pathname}${url.search} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) if (!/^proxy-/i.test(req.rawHeaders[i]!)) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on('error', () => socket.destroy());
    socket.on('close', () => upstream.destroy());
  }
}
