import { isIP, connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { fetchPage, type AddressPolicy, type FetchSettings, type Lookup } from '@crawlfleet/fetch';
import type { ProbeOptions } from './proxy-pool.js';

/** How long a probe may take: a connection, or a request through the proxy. */
const PROBE_TIMEOUT_MS = 5000;

/**
 * Pure: the SSRF guard's policy for the operator's probe URL: public addresses; and when its host is
 * an IP address, that address too (the operator wrote it down, and no DNS answer can change it). A
 * name that resolves to a private, loopback or link-local address is refused, whenever it is asked.
 */
export function probeAddressPolicy(probeUrl: string): AddressPolicy {
  const host = new URL(probeUrl).hostname.replace(/^\[|\]$/g, '');
  return { allowPrivate: false, allowed: isIP(host) ? [host] : [] };
}

/** Does the proxy take a connection (and, for an `https://` proxy, a TLS handshake) within the timeout? */
export function proxyAccepts(proxyUrl: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<boolean> {
  const proxy = new URL(proxyUrl);
  const host = proxy.hostname.replace(/^\[|\]$/g, '');
  const tls = proxy.protocol === 'https:';
  const port = Number(proxy.port || (tls ? 443 : 80));
  return new Promise((resolve) => {
    const socket: Socket = tls ? tlsConnect({ host, port, ...(isIP(host) ? {} : { servername: host }) }) : connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once(tls ? 'secureConnect' : 'connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export interface ProxyProbeOptions {
  /** PROXY_PROBE_URL: the operator's URL to request through the proxy; none: a connection to the proxy only */
  probeUrl: string | undefined;
  /** the fetcher's name resolution (HOST_RESOLVE, then DNS); the probe URL's policy vets its answers */
  resolve: Lookup | undefined;
  userAgent: () => string;
}

/**
 * The probe of a banned proxy. It never goes where a crawled page says: with PROXY_PROBE_URL it
 * requests that URL through the proxy, under the SSRF guard (the proxy tunnels to the vetted address);
 * without, it only checks that the proxy takes connections again.
 */
export function proxyProbe(options: ProxyProbeOptions): ProbeOptions['probe'] {
  const { probeUrl, resolve } = options;
  if (probeUrl === undefined) return (entry) => proxyAccepts(entry.url);
  const policy = probeAddressPolicy(probeUrl);
  const settings: FetchSettings = {
    allowPrivateAddresses: false,
    allowedAddresses: policy.allowed,
    limits: { maxResponseBytes: 64 * 1024, timeoutMs: PROBE_TIMEOUT_MS, maxRedirects: 0 },
  };
  return async (_entry, agents) => (await fetchPage(probeUrl, settings, { userAgent: options.userAgent(), agent: agents, ...(resolve ? { lookup: resolve } : {}) })).status > 0;
}
