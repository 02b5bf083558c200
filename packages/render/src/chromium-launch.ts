/**
 * The variables Chromium gets from the renderer's environment, and no others: what it needs to find
 * programs, fonts, its locale and time zone. The renderer's own environment holds the fleet's
 * secrets (REDIS_URL, MONGO_URL, PROXY_LIST, DASHBOARD_PASSWORD, ...), and a browser that runs
 * whatever pages send has no business with them: they would sit in /proc/<pid>/environ of every
 * Chromium process, for anything that breaks out of a page to read.
 */
const CHROMIUM_ENV = new Set([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'LANG',
  'LANGUAGE',
  'TZ',
  'FONTCONFIG_FILE',
  'FONTCONFIG_PATH',
  'FONTCONFIG_SYSROOT',
  'XDG_CONFIG_HOME',
  'XDG_CACHE_HOME',
  'XDG_DATA_HOME',
  'XDG_DATA_DIRS',
  'XDG_CONFIG_DIRS',
  'XDG_RUNTIME_DIR',
]);
/** The locale's categories (LC_ALL, LC_CTYPE, ...). */
const CHROMIUM_ENV_PREFIX = 'LC_';

/** Pure: the allow-listed part of `env`, with `set` added over it (TMPDIR, the launcher's profile). */
export function chromiumEnvironment(env: NodeJS.ProcessEnv, set: Record<string, string>): Record<string, string> {
  const kept = Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined && (CHROMIUM_ENV.has(entry[0]) || entry[0].startsWith(CHROMIUM_ENV_PREFIX)));
  return { ...Object.fromEntries(kept), ...set };
}

/** CHROMIUM_SANDBOX: `auto` sandboxes where the platform allows, `on` insists, `off` never tries. */
export type SandboxSetting = 'auto' | 'on' | 'off';

export interface SandboxPlan {
  /** launch with Chromium's sandbox */
  sandbox: boolean;
  /** why not, for the log */
  reason?: string;
  /** a failure to start the sandbox is an error (on), rather than a reason to go without it (auto) */
  required: boolean;
}

/** What a container must grant for the sandbox, for the log and the docs. */
export const SANDBOX_NEEDS =
  'a non-root user and unprivileged user namespaces (clone/unshare with CLONE_NEWUSER): Docker and Kubernetes RuntimeDefault seccomp profiles refuse them; infra/k8s/README.md, "Chromium\'s sandbox"';

/**
 * Pure: whether to launch Chromium with its sandbox. Chromium refuses its sandbox to root
 * (crbug.com/638180), so a renderer running as root goes without it unless told `on`; otherwise it
 * tries, and `auto` falls back when the platform refuses (isSandboxFailure).
 */
export function sandboxPlan(setting: SandboxSetting, uid: number): SandboxPlan {
  if (setting === 'off') return { sandbox: false, reason: 'CHROMIUM_SANDBOX=off', required: false };
  if (setting === 'on') return { sandbox: true, required: true };
  if (uid === 0) return { sandbox: false, reason: `the renderer runs as root, and Chromium refuses its sandbox to root; it needs ${SANDBOX_NEEDS}`, required: false };
  return { sandbox: true, required: false };
}

/** Pure: whether a launch failed because Chromium could not start its sandbox (playwright-core's message, or Chromium's own). */
export function isSandboxFailure(message: string): boolean {
  return /sandboxing failed|No usable sandbox|crbug\.com\/638180|crbug\.com\/357670/i.test(message);
}
