import { DEFAULT_RENDER_BLOCK, type Spider } from './schema.js';

export type RenderMode = 'never' | 'always' | 'auto';

/** A spider's `render` setting with every default filled in (the string form is the mode alone). */
export interface RenderSettings {
  mode: RenderMode;
  rules: { match: string; mode: RenderMode }[];
  waitFor: { selector?: string | undefined; networkIdle: boolean; maxWaitMs: number };
  timeoutMs: number;
  block: string[];
  maxRequestsPerPage: number;
}

/** Pure: the spider's render settings, normalized. */
export function renderSettings(spider: Pick<Spider, 'render'>): RenderSettings {
  const render = spider.render ?? 'never';
  if (typeof render === 'string') return { mode: render, rules: [], waitFor: { networkIdle: false, maxWaitMs: 5000 }, timeoutMs: 30_000, block: DEFAULT_RENDER_BLOCK, maxRequestsPerPage: 100 };
  return render;
}

/** Pure: how a URL is rendered: the first rule that matches it, else the spider's mode. */
export function renderModeFor(settings: Pick<RenderSettings, 'mode' | 'rules'>, url: string): RenderMode {
  for (const rule of settings.rules) if (new RegExp(rule.match).test(url)) return rule.mode;
  return settings.mode;
}

/** Pure: can this spider send any page to the render stage? (A crawl that never renders needs no renderer.) */
export function mayRender(spider: Pick<Spider, 'render'>): boolean {
  const settings = renderSettings(spider);
  return settings.mode !== 'never' || settings.rules.some((r) => r.mode !== 'never');
}
