import { proxyScore, type ProxyHealth } from './proxy-health.js';

/** A proxy as status and monitor show it: its label (credentials redacted), state and health. */
export interface ProxyView {
  proxy: string;
  state: 'ok' | 'banned';
  score: number;
  ok: number;
  failed: number;
  blocked: number;
  bans: number;
  latencyMs: number | null;
  lastSuccessAt: string | null;
  /** when a banned proxy is probed next */
  nextProbeAt: string | null;
}

const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());

/** Pure. */
export function proxyView(h: ProxyHealth, now: number): ProxyView {
  return {
    proxy: h.label,
    state: h.banned ? 'banned' : 'ok',
    score: Math.round(proxyScore(h, now) * 1000) / 1000,
    ok: h.ok,
    failed: h.fail - h.blocks,
    blocked: h.blocks,
    bans: h.bans,
    latencyMs: h.latencyMs === undefined ? null : Math.round(h.latencyMs),
    lastSuccessAt: iso(h.lastOkAt),
    nextProbeAt: h.banned ? iso(h.probeAt) : null,
  };
}

/** Pure: the proxies as a table for a terminal. */
export function formatProxies(views: ProxyView[]): string {
  if (views.length === 0) return '  proxies: none (direct requests)';
  const rows = views.map(
    (v) =>
      `  ${v.state === 'ok' ? 'ok    ' : 'BANNED'} ${v.proxy.padEnd(36)} score ${v.score.toFixed(2)}  ok ${v.ok}  failed ${v.failed}  blocked ${v.blocked}  ${v.latencyMs === null ? '' : `${v.latencyMs} ms`}${v.nextProbeAt ? `  probe at ${v.nextProbeAt}` : ''}`,
  );
  return ['  proxies:', ...rows].join('\n');
}
