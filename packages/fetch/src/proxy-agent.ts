import { lookup as dnsLookup } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Lookup } from './address-guard.js';

export interface ProxyAgentOptions extends http.AgentOptions {
  /** the proxy, `http://` or `https://`, with optional `user:password@` */
  proxy: string;
  /**
   * send `CONNECT name:port` and let the proxy resolve the name (a geo proxy): what it resolves to is
   * outside the SSRF guard. Off: the name is resolved and vetted here and the proxy is handed the IP.
   */
  resolveNames?: boolean;
}

/** What Node hands an agent's createConnection: the request's options, merged with the agent's. */
type ConnectionOptions = http.ClientRequestArgs & { lookup?: Lookup; servername?: string; timeout?: number };
type ConnectionCallback = (err: Error | null, socket?: Duplex) => void;
/** What both tunnel agents (http and https) know of their proxy. */
type Tunnel = { proxy: URL; resolveNames: boolean; keepAlive: boolean };

/**
 * Pure: the authority of the CONNECT request: the vetted address, or with `resolveNames` the name
 * itself. An IPv6 address goes in brackets ([fd00::1]:443).
 */
export function connectTarget(name: string, port: number, address: string | undefined, resolveNames: boolean): string {
  const host = resolveNames || address === undefined ? name : address;
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * Opens a tunnel through the proxy to the request's host. Unless the proxy resolves names, the host
 * is resolved first with the request's own lookup, the one a direct connection would use (HOST_RESOLVE
 * and the SSRF guard's vetting, see fetchPage), so a forbidden answer fails here, before the proxy
 * hears of it, and the proxy is asked for the vetted IP: its own DNS never sees the name. Every new
 * socket does this, so each redirect hop is vetted like the first request. The errors are hpagent's
 * ("Proxy timeout", "Bad response: 407"), which isProxyFault tells from a fault of the site.
 */
function openTunnel({ proxy, resolveNames, keepAlive }: Tunnel, options: ConnectionOptions, callback: (err: Error | null, socket?: Socket) => void): void {
  const name = String(options.host ?? 'localhost').replace(/^\[|\]$/g, '');
  const port = Number(options.port);
  const connect = (address: string | undefined) => {
    const target = connectTarget(name, port, address, resolveNames);
    const headers: Record<string, string> = { host: target, connection: keepAlive ? 'keep-alive' : 'close' };
    if (proxy.username || proxy.password) {
      headers['proxy-authorization'] = `Basic ${Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString('base64')}`;
    }
    const request = (proxy.protocol === 'https:' ? https : http).request({
      method: 'CONNECT',
      host: proxy.hostname.replace(/^\[|\]$/g, ''),
      port: proxy.port || (proxy.protocol === 'https:' ? 443 : 80),
      path: target,
      setHost: false,
      headers,
      agent: false,
      timeout: options.timeout ?? 0,
      ...(proxy.protocol === 'https:' ? { servername: proxy.hostname } : {}),
    });
    request.once('connect', (response, socket) => {
      request.removeAllListeners();
      socket.removeAllListeners();
      if (response.statusCode === 200) return callback(null, socket);
      socket.destroy();
      callback(new Error(`Bad response: ${response.statusCode}`));
    });
    request.once('timeout', () => request.destroy(new Error('Proxy timeout')));
    request.once('error', (err) => {
      request.removeAllListeners();
      callback(err);
    });
    request.end();
  };
  if (resolveNames) {
    connect(undefined);
    return;
  }
  const resolve = options.lookup ?? (dnsLookup as unknown as Lookup);
  resolve(name, {}, (err, address) => (err ? callback(err) : connect(address as string)));
}

/** Plain http through the proxy, tunnelled like https (CONNECT), so the proxy never reads an absolute URI to resolve. */
export class HttpTunnelAgent extends http.Agent {
  private readonly tunnel: Tunnel;

  constructor({ proxy, resolveNames = false, ...options }: ProxyAgentOptions) {
    super(options);
    this.tunnel = { proxy: new URL(proxy), resolveNames, keepAlive: options.keepAlive ?? false };
  }

  override createConnection(options: ConnectionOptions, callback: ConnectionCallback): undefined {
    openTunnel(this.tunnel, options, callback);
    return undefined;
  }
}

/**
 * https through the proxy: TLS inside the tunnel, with SNI and the certificate check on the name
 * (Node sets `servername` from the Host header), whatever address the tunnel goes to.
 */
export class HttpsTunnelAgent extends https.Agent {
  private readonly tunnel: Tunnel;

  constructor({ proxy, resolveNames = false, ...options }: ProxyAgentOptions) {
    super(options);
    this.tunnel = { proxy: new URL(proxy), resolveNames, keepAlive: options.keepAlive ?? false };
  }

  override createConnection(options: ConnectionOptions, callback: ConnectionCallback): undefined {
    openTunnel(this.tunnel, options, (err, socket) => {
      if (err) return callback(err);
      callback(null, super.createConnection({ ...options, socket } as never, undefined as never) ?? undefined);
    });
    return undefined;
  }
}

/** A proxy's pair of agents, for got's `agent` option. */
export function proxyAgents(options: ProxyAgentOptions): { http: HttpTunnelAgent; https: HttpsTunnelAgent } {
  return { http: new HttpTunnelAgent(options), https: new HttpsTunnelAgent(options) };
}
