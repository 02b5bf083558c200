import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { Deployment, type IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet, type IStatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { PodDisruptionBudget, type IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { NetworkPolicy, type INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret, type ISecret } from 'kubernetes-models/v1/Secret';
import { Service, type IService } from 'kubernetes-models/v1/Service';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IPodTemplateSpec } from 'kubernetes-models/v1/PodTemplateSpec';
import { ScaledObject, type IScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { PrometheusRule, type IPrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor, type IServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { stringify as toYaml } from 'yaml';
import { ROOT } from '../helpers/cli.js';

/**
 * The Kubernetes manifests (infra/k8s): each overlay rendered by kustomize, every object validated
 * against its schema (kubernetes-models, KEDA's CRD for ScaledObject), then what the fleet relies on.
 * No cluster is involved: this proves the manifests are well-formed and consistent, not that they run.
 */

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

/** The schema of each apiVersion/kind the overlays may render; any other kind fails the test. */
// biome-ignore lint/suspicious/noExplicitAny: each model's constructor takes its own kind's shape (ScaledObject requires spec); the rendered object is validated at run time
const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  'v1/Namespace': Namespace,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
};

const NAMESPACE = 'crawlfleet';
const SECRET = 'crawlfleet-secrets';
const SECRET_KEYS = ['REDIS_URL', 'MONGO_URL', 'PROXY_LIST', 'DASHBOARD_USER', 'DASHBOARD_PASSWORD'];
/** What the test's secrets.env holds in place of the examples' replace-me. */
const TEST_SECRET = 'test-secret-0123';
const TEST_IMAGE = 'registry.example.com/crawlfleet:1.0.0';
const TEST_RENDERER_IMAGE = 'registry.example.com/crawlfleet-renderer:1.0.0';

const WORKERS = [
  { stage: 'fetcher', queue: 'fetch', concurrency: 32, grace: 60, threshold: 32 },
  { stage: 'parser', queue: 'parse', concurrency: 4, grace: 60, threshold: 100 },
  { stage: 'writer', queue: 'write', concurrency: 32, grace: 120, threshold: 500 },
] as const;

/** The renderer: the fetch stage's jobs that need a browser, from the `render` queue, in the image's variant with Chromium. */
const RENDERER = { name: 'crawlfleet-renderer', queue: 'render', concurrency: 4, grace: 60 } as const;

const OVERLAYS = {
  small: {
    maxReplicas: { fetcher: 4, parser: 3, writer: 3, renderer: 2 },
    fetcherConcurrency: 32,
    databases: true,
    image: 'crawlfleet:latest',
    rendererImage: 'crawlfleet-renderer:latest',
    secretKeys: [...SECRET_KEYS, 'REDIS_PASSWORD', 'MONGO_USER', 'MONGO_PASSWORD'],
  },
  large: {
    maxReplicas: { fetcher: 32, parser: 16, writer: 8, renderer: 16 },
    fetcherConcurrency: 64,
    databases: false,
    image: TEST_IMAGE,
    rendererImage: TEST_RENDERER_IMAGE,
    secretKeys: SECRET_KEYS,
  },
} as const;

function kustomize(): string {
  const bin = process.env.KUSTOMIZE_BIN;
  if (!bin) {
    throw new Error('KUSTOMIZE_BIN is not set: run scripts/test.sh (its ensure_kustomize in scripts/services.sh builds kustomize and sets it)');
  }
  return bin;
}

/**
 * A copy of infra/k8s with what an operator writes before applying an overlay: secrets.env from
 * its example (every replace-me set), and for the large overlay image.env (both images, or the
 * fleet's alone with `rendererImage: false`).
 */
function operatorCopy(files: { secrets?: boolean; image?: boolean; rendererImage?: boolean } = { secrets: true, image: true }): string {
  const dir = mkdtempSync(join(tmpdir(), 'crawlfleet-k8s-'));
  cpSync(join(ROOT, 'infra', 'k8s'), dir, { recursive: true });
  for (const overlay of Object.keys(OVERLAYS)) {
    rmSync(join(dir, 'overlays', overlay, 'secrets.env'), { force: true });
    rmSync(join(dir, 'overlays', overlay, 'image.env'), { force: true });
    const example = readFileSync(join(dir, 'overlays', overlay, 'secrets.env.example'), 'utf8');
    if (files.secrets) writeFileSync(join(dir, 'overlays', overlay, 'secrets.env'), example.replaceAll('replace-me', TEST_SECRET));
  }
  if (files.image) writeFileSync(join(dir, 'overlays', 'large', 'image.env'), `IMAGE=${TEST_IMAGE}\n${files.rendererImage === false ? '' : `RENDERER_IMAGE=${TEST_RENDERER_IMAGE}\n`}`);
  return dir;
}

/** A Secret's values, decoded (a secretGenerator writes `data`, base64). */
function secretValues(secret: ISecret): Record<string, string> {
  return { ...Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')])), ...secret.stringData };
}

function render(overlay: string, components: string[] = []): K8sObject[] {
  const dir = operatorCopy();
  let out: string;
  try {
    let target = join(dir, 'overlays', overlay);
    if (components.length > 0) {
      // an overlay of the operator's own that adds the components
      target = join(dir, 'overlays', `${overlay}-with-components`);
      mkdirSync(target);
      writeFileSync(
        join(target, 'kustomization.yaml'),
        toYaml({ apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization', resources: [`../${overlay}`], components: components.map((c) => `../../components/${c}`) }),
      );
    }
    out = execFileSync(kustomize(), ['build', target], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const objects: K8sObject[] = [];
  for (const doc of parseAllDocuments(out)) {
    if (doc.errors.length > 0) throw new Error(`kustomize build ${overlay}: YAML errors: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value = doc.toJS() as K8sObject | null;
    // kustomize wraps a generated Secret's long base64 values at 70 characters; the API server's
    // decoder (Go's encoding/base64) skips the line breaks, the schema's "byte" format does not.
    if (value?.kind === 'Secret' && value.data) value.data = Object.fromEntries(Object.entries(value.data as Record<string, string>).map(([k, v]) => [k, v.replace(/\s+/g, '')]));
    if (value !== null) objects.push(value);
  }
  return objects;
}

const id = (o: K8sObject) => `${o.kind}/${o.metadata?.name}`;

/** Every schema error of every object, as "Kind/name: message" lines. */
function schemaErrors(objects: K8sObject[]): string[] {
  const errors: string[] = [];
  for (const o of objects) {
    const Model = MODELS[`${o.apiVersion}/${o.kind}`];
    if (!Model) {
      errors.push(`${id(o)}: no schema for ${o.apiVersion} ${o.kind} (add it to MODELS)`);
      continue;
    }
    try {
      new Model(o).validate();
    } catch (err) {
      errors.push(`${id(o)}: ${(err as Error).message}`);
    }
  }
  return errors;
}

/** A quantity in base units (bytes, cores), for comparing requests with limits. */
function quantity(q: string | number | undefined): number {
  if (q === undefined) return NaN;
  if (typeof q === 'number') return q;
  const m = /^(\d+(?:\.\d+)?)(m|k|M|G|Ki|Mi|Gi|Ti)?$/.exec(q);
  if (!m) throw new Error(`unparsed quantity ${q}`);
  const unit = { m: 1e-3, k: 1e3, M: 1e6, G: 1e9, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 }[m[2] ?? ''] ?? 1;
  return Number(m[1]) * unit;
}

function selects(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  if (!selector || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/** The Pod Security "restricted" profile, and a writable /tmp on an emptyDir under a read-only root. */
function expectRestricted(name: string, template: IPodTemplateSpec, uid?: number): void {
  const pod = template.spec!;
  const sc = pod.securityContext ?? {};
  expect({ name, runAsNonRoot: sc.runAsNonRoot, seccomp: sc.seccompProfile?.type }).toEqual({ name, runAsNonRoot: true, seccomp: 'RuntimeDefault' });
  if (uid !== undefined) expect({ name, runAsUser: sc.runAsUser, fsGroup: sc.fsGroup }).toEqual({ name, runAsUser: uid, fsGroup: uid });
  for (const c of [...pod.containers, ...(pod.initContainers ?? [])]) {
    const csc = c.securityContext ?? {};
    expect({
      container: `${name}/${c.name}`,
      allowPrivilegeEscalation: csc.allowPrivilegeEscalation,
      readOnlyRootFilesystem: csc.readOnlyRootFilesystem,
      drop: csc.capabilities?.drop,
      privileged: csc.privileged ?? false,
      runAsUser: csc.runAsUser ?? sc.runAsUser,
    }).toEqual({ container: `${name}/${c.name}`, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, drop: ['ALL'], privileged: false, runAsUser: expect.any(Number) });
    expect(csc.runAsUser ?? sc.runAsUser).toBeGreaterThan(0);
    const tmp = c.volumeMounts?.find((m) => m.mountPath === '/tmp');
    expect({ container: `${name}/${c.name}`, tmp: tmp && pod.volumes?.find((v) => v.name === tmp.name)?.emptyDir !== undefined }).toEqual({ container: `${name}/${c.name}`, tmp: true });
  }
  for (const v of pod.volumes ?? []) {
    // restricted allows these volume types only (hostPath and the like are refused)
    const types = Object.keys(v).filter((k) => k !== 'name');
    expect(types.every((t) => ['emptyDir', 'persistentVolumeClaim', 'secret', 'configMap', 'projected', 'downwardAPI', 'ephemeral', 'csi'].includes(t))).toBe(true);
  }
}

function expectResources(name: string, c: IContainer): void {
  const r = c.resources ?? {};
  for (const res of ['cpu', 'memory']) {
    const request = quantity(r.requests?.[res]);
    const limit = quantity(r.limits?.[res]);
    expect({ container: `${name}/${c.name}`, res, request: request > 0, limit: limit >= request }).toEqual({ container: `${name}/${c.name}`, res, request: true, limit: true });
  }
}

describe.each(Object.keys(OVERLAYS) as (keyof typeof OVERLAYS)[])('infra/k8s/overlays/%s', (overlay) => {
  const expected = OVERLAYS[overlay];
  let objects: K8sObject[] = [];
  const all = <T>(kind: string): (T & K8sObject)[] => objects.filter((o) => o.kind === kind) as (T & K8sObject)[];
  const one = <T>(kind: string, name: string): T & K8sObject => {
    const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
    if (!found) throw new Error(`${overlay}: no ${kind}/${name} among ${objects.map(id).join(', ')}`);
    return found as T & K8sObject;
  };
  const podOwners = () => [...all<IDeployment>('Deployment'), ...all<IStatefulSet>('StatefulSet')];

  beforeAll(() => {
    objects = render(overlay);
  });

  test('renders, and every object is valid against its schema', () => {
    expect(objects.length).toBeGreaterThan(10);
    expect(schemaErrors(objects)).toEqual([]);
    // no object twice, and all in the overlay's namespace (the Namespace itself is cluster-wide)
    expect(new Set(objects.map(id)).size).toBe(objects.length);
    for (const o of objects) {
      if (o.kind === 'Namespace') expect(o.metadata.name).toBe(NAMESPACE);
      else expect({ object: id(o), namespace: o.metadata.namespace }).toEqual({ object: id(o), namespace: NAMESPACE });
    }
  });

  test('every workload selects its own pods, runs under the restricted profile, with requests and limits', () => {
    const owners = podOwners();
    expect(owners.length).toBeGreaterThanOrEqual(4);
    for (const w of owners) {
      const template = w.spec!.template;
      expect(selects(w.spec!.selector.matchLabels, template.metadata?.labels)).toBe(true);
      // no two workloads share pods
      for (const other of owners) if (other !== w) expect({ [id(w)]: selects(w.spec!.selector.matchLabels, other.spec!.template.metadata?.labels) }).toEqual({ [id(w)]: false });
      expectRestricted(id(w), template);
      for (const c of template.spec!.containers) {
        expectResources(id(w), c);
        expect({ container: `${id(w)}/${c.name}`, readiness: c.readinessProbe !== undefined, liveness: c.livenessProbe !== undefined }).toEqual({
          container: `${id(w)}/${c.name}`,
          readiness: true,
          liveness: true,
        });
      }
    }
  });

  test('the Secret has every key, and every secretKeyRef names it and one of its keys', () => {
    const secret = one<ISecret>('Secret', SECRET);
    const keys = Object.keys(secretValues(secret)).sort();
    expect(keys).toEqual([...expected.secretKeys].sort());
    for (const w of podOwners()) {
      for (const c of w.spec!.template.spec!.containers) {
        for (const e of c.env ?? []) {
          const ref = e.valueFrom?.secretKeyRef;
          if (!ref) continue;
          expect({ env: `${id(w)}/${c.name}/${e.name}`, secret: ref.name, key: keys.includes(ref.key) }).toEqual({ env: `${id(w)}/${c.name}/${e.name}`, secret: SECRET, key: true });
          // crawlfleet's credentials come from the Secret under their own name; only PROXY_LIST may be absent
          if (c.image === expected.image || c.image === expected.rendererImage) expect(ref.key).toBe(e.name);
          expect(ref.optional ?? false).toBe(e.name === 'PROXY_LIST');
        }
      }
    }
  });

  describe.each(WORKERS)('the $stage stage', ({ stage, queue, concurrency, grace, threshold }) => {
    const name = `crawlfleet-${stage}`;

    test('Deployment: args, env, probes on the metrics port, resources, grace period, restricted profile, Prometheus annotations', () => {
      const d = one<IDeployment>('Deployment', name);
      const template = d.spec!.template;
      const pod = template.spec!;
      expect(pod.containers).toHaveLength(1);
      const c = pod.containers[0]!;
      expect(c.image).toBe(expected.image);
      expect(c.args).toEqual(['worker', stage, '--concurrency', String(stage === 'fetcher' ? expected.fetcherConcurrency : concurrency)]);
      const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value ?? `secret:${e.valueFrom?.secretKeyRef?.key}`]));
      expect(env).toMatchObject({ REDIS_URL: 'secret:REDIS_URL', QUEUE_PREFIX: 'crawlfleet', LOG_LEVEL: 'info', METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0' });
      // each credential only where it is used
      expect(env.MONGO_URL).toBe(stage === 'writer' ? 'secret:MONGO_URL' : undefined);
      expect(env.PROXY_LIST).toBe(stage === 'fetcher' ? 'secret:PROXY_LIST' : undefined);
      expect(env.DASHBOARD_PASSWORD).toBeUndefined();

      expect(c.ports).toContainEqual(expect.objectContaining({ name: 'metrics', containerPort: 9464 }));
      expect(c.livenessProbe?.httpGet).toMatchObject({ path: '/healthz', port: 'metrics' });
      expect(c.readinessProbe?.httpGet).toMatchObject({ path: '/readyz', port: 'metrics' });
      expect(template.metadata?.annotations).toMatchObject({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9464', 'prometheus.io/path': '/metrics' });

      expect(pod.terminationGracePeriodSeconds).toBe(grace);
      expectResources(name, c);
      const r = c.resources!;
      expect(quantity(r.limits!.memory)).toBe(2 * quantity(r.requests!.memory));
      expect(quantity(r.limits!.cpu)).toBeGreaterThanOrEqual(1);
      expectRestricted(name, template, 1000);
      // KEDA owns the replica count: a replicas field would reset it at every apply
      expect(d.spec!.replicas).toBeUndefined();
    });

    test('a PodDisruptionBudget and a metrics Service select its pods', () => {
      const labels = one<IDeployment>('Deployment', name).spec!.template.metadata!.labels;
      const pdbs = all<IPodDisruptionBudget>('PodDisruptionBudget').filter((p) => selects(p.spec!.selector?.matchLabels, labels));
      expect(pdbs).toHaveLength(1);
      expect(pdbs[0]!.spec!.maxUnavailable).toBe(1);
      const services = all<IService>('Service').filter((s) => selects(s.spec!.selector, labels));
      expect(services.flatMap((s) => s.spec!.ports ?? [])).toContainEqual(expect.objectContaining({ port: 9464, targetPort: 'metrics' }));
    });

    test(`a ScaledObject scales it on max(crawlfleet_queue_ready{queue="${queue}"}) through Prometheus, with a fallback`, () => {
      const scalers = all<IScaledObject>('ScaledObject').filter((s) => s.spec.scaleTargetRef.name === name);
      expect(scalers).toHaveLength(1);
      const so = scalers[0]!.spec;
      expect(so.scaleTargetRef.kind ?? 'Deployment').toBe('Deployment');
      expect(so.scaleTargetRef.apiVersion ?? 'apps/v1').toBe('apps/v1');
      expect({ min: so.minReplicaCount, max: so.maxReplicaCount, cooldown: so.cooldownPeriod }).toEqual({ min: 1, max: expected.maxReplicas[stage], cooldown: 120 });
      expect(so.triggers).toHaveLength(1);
      const trigger = so.triggers[0]!;
      expect(trigger.type).toBe('prometheus');
      const query = trigger.metadata?.query ?? '';
      expect(query.replace(/\s+/g, '')).toBe(`max(crawlfleet_queue_ready{queue="${queue}"})`);
      expect(trigger.metadata?.serverAddress).toMatch(/^https?:\/\/[^/\s]+/);
      // A fetcher per as many ready requests as it runs at once.
      expect(trigger.metadata?.threshold).toBe(String(stage === 'fetcher' ? expected.fetcherConcurrency : threshold));
      expect(so.fallback).toEqual({ failureThreshold: 3, replicas: 2 });
    });
  });

  describe('the renderer (infra/k8s/base/renderer.yaml)', () => {
    test("Deployment: the Chromium image, the fetchers' settings, probes, Chromium's memory, /tmp and a memory-backed /dev/shm, restricted profile", () => {
      const d = one<IDeployment>('Deployment', RENDERER.name);
      const template = d.spec!.template;
      const pod = template.spec!;
      expect(pod.containers).toHaveLength(1);
      const c = pod.containers[0]!;
      // the image's variant with Chromium, not the fleet's small image
      expect(c.image).toBe(expected.rendererImage);
      expect(c.image).not.toBe(expected.image);
      expect(c.args).toEqual(['worker', 'renderer', '--concurrency', String(RENDERER.concurrency)]);
      const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value ?? `secret:${e.valueFrom?.secretKeyRef?.key}`]));
      // the fetch stage's settings, as the fetcher has them; CHROMIUM_PATH is the image's
      const fetcher = one<IDeployment>('Deployment', 'crawlfleet-fetcher').spec!.template.spec!.containers[0]!;
      const fetcherEnv = Object.fromEntries((fetcher.env ?? []).map((e) => [e.name, e.value ?? `secret:${e.valueFrom?.secretKeyRef?.key}`]));
      expect(env).toEqual(fetcherEnv);
      expect(env).toEqual({
        REDIS_URL: 'secret:REDIS_URL',
        PROXY_LIST: 'secret:PROXY_LIST',
        QUEUE_PREFIX: 'crawlfleet',
        LOG_LEVEL: 'info',
        METRICS_PORT: '9464',
        METRICS_HOST: '0.0.0.0',
      });

      expect(c.ports).toContainEqual(expect.objectContaining({ name: 'metrics', containerPort: 9464 }));
      expect(c.startupProbe?.httpGet).toMatchObject({ path: '/healthz', port: 'metrics' });
      expect(c.livenessProbe?.httpGet).toMatchObject({ path: '/healthz', port: 'metrics' });
      expect(c.readinessProbe?.httpGet).toMatchObject({ path: '/readyz', port: 'metrics' });
      expect(template.metadata?.annotations).toMatchObject({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9464', 'prometheus.io/path': '/metrics' });
      expect(pod.terminationGracePeriodSeconds).toBe(RENDERER.grace);

      // Chromium's memory: 1 GiB requested, 2 GiB at most; a core or two.
      expect(c.resources).toEqual({ requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '2', memory: '2Gi' } });
      expectRestricted(RENDERER.name, template, 1000);
      // /tmp: the browser's profile and, under --disable-dev-shm-usage, its shared memory; /dev/shm in memory.
      const volume = (mountPath: string) => pod.volumes?.find((v) => v.name === c.volumeMounts?.find((m) => m.mountPath === mountPath)?.name);
      expect(volume('/tmp')?.emptyDir).toEqual({ sizeLimit: '1Gi' });
      expect(volume('/dev/shm')?.emptyDir).toEqual({ medium: 'Memory', sizeLimit: '512Mi' });
      expect(d.spec!.replicas).toBeUndefined();
    });

    test('a PodDisruptionBudget and a metrics Service select its pods; Prometheus annotations like the other workers', () => {
      const labels = one<IDeployment>('Deployment', RENDERER.name).spec!.template.metadata!.labels;
      expect(labels).toEqual({ 'app.kubernetes.io/name': 'crawlfleet', 'app.kubernetes.io/component': 'renderer', 'app.kubernetes.io/part-of': 'crawlfleet' });
      const pdbs = all<IPodDisruptionBudget>('PodDisruptionBudget').filter((p) => selects(p.spec!.selector?.matchLabels, labels));
      expect(pdbs).toHaveLength(1);
      expect(pdbs[0]!.spec!.maxUnavailable).toBe(1);
      const services = all<IService>('Service').filter((s) => selects(s.spec!.selector, labels));
      expect(services.map((s) => [s.metadata.name, s.spec!.clusterIP, s.spec!.ports])).toEqual([
        ['crawlfleet-renderer-metrics', 'None', [{ name: 'metrics', port: 9464, targetPort: 'metrics', protocol: 'TCP' }]],
      ]);
    });

    test('a ScaledObject scales it from 0 on max(crawlfleet_queue_ready{queue="render"}), 4 ready renders per replica, falling back to 1', () => {
      const scalers = all<IScaledObject>('ScaledObject').filter((s) => s.spec.scaleTargetRef.name === RENDERER.name);
      expect(scalers).toHaveLength(1);
      expect(scalers[0]!.metadata.name).toBe(RENDERER.name);
      expect(scalers[0]!.spec).toEqual({
        scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: RENDERER.name },
        pollingInterval: 15,
        cooldownPeriod: 120,
        minReplicaCount: 0,
        maxReplicaCount: expected.maxReplicas.renderer,
        advanced: { horizontalPodAutoscalerConfig: { behavior: { scaleDown: { stabilizationWindowSeconds: 120 } } } },
        fallback: { failureThreshold: 3, replicas: 1 },
        triggers: [
          {
            type: 'prometheus',
            metadata: {
              serverAddress: 'http://prometheus.monitoring.svc:9090',
              query: `max(crawlfleet_queue_ready{queue="${RENDERER.queue}"})`,
              threshold: String(RENDERER.concurrency),
              ignoreNullValues: 'false',
            },
          },
        ],
      });
      // The threshold is the Deployment's --concurrency, and the fetcher's trigger differs in its queue alone.
      const args = one<IDeployment>('Deployment', RENDERER.name).spec!.template.spec!.containers[0]!.args!;
      expect(scalers[0]!.spec.triggers[0]!.metadata!.threshold).toBe(args[args.indexOf('--concurrency') + 1]);
      const fetcherTrigger = one<IScaledObject>('ScaledObject', 'crawlfleet-fetcher').spec.triggers[0]!;
      expect({ type: fetcherTrigger.type, server: fetcherTrigger.metadata!.serverAddress, query: fetcherTrigger.metadata!.query!.replace('"fetch"', `"${RENDERER.queue}"`) }).toEqual({
        type: 'prometheus',
        server: scalers[0]!.spec.triggers[0]!.metadata!.serverAddress,
        query: scalers[0]!.spec.triggers[0]!.metadata!.query,
      });
    });
  });

  test('the dashboard: Deployment with probes on its http port, Secret credentials, a PDB and a Service on port 3000', () => {
    const d = one<IDeployment>('Deployment', 'crawlfleet-dashboard');
    const template = d.spec!.template;
    const c = template.spec!.containers[0]!;
    expect(c.image).toBe(expected.image);
    expect(c.args).toEqual(['dashboard', '--host', '0.0.0.0', '--port', '3000']);
    const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value ?? `secret:${e.valueFrom?.secretKeyRef?.key}`]));
    expect(env).toMatchObject({
      REDIS_URL: 'secret:REDIS_URL',
      DASHBOARD_USER: 'secret:DASHBOARD_USER',
      DASHBOARD_PASSWORD: 'secret:DASHBOARD_PASSWORD',
      QUEUE_PREFIX: 'crawlfleet',
      LOG_LEVEL: 'info',
    });
    expect(env.PROXY_LIST).toBeUndefined();
    expect(c.ports).toContainEqual(expect.objectContaining({ name: 'http', containerPort: 3000 }));
    expect(c.livenessProbe?.httpGet).toMatchObject({ path: '/healthz', port: 'http' });
    expect(c.readinessProbe?.httpGet).toMatchObject({ path: '/readyz', port: 'http' });
    expect(template.spec!.terminationGracePeriodSeconds).toBe(10);
    // Its /metrics needs the dashboard's credentials: not for annotation discovery.
    expect(template.metadata?.annotations).toMatchObject({ 'prometheus.io/scrape': 'false' });
    expectResources('dashboard', c);
    expectRestricted('dashboard', template, 1000);

    const labels = template.metadata!.labels;
    const pdbs = all<IPodDisruptionBudget>('PodDisruptionBudget').filter((p) => selects(p.spec!.selector?.matchLabels, labels));
    expect(pdbs).toHaveLength(1);
    expect(pdbs[0]!.spec!.maxUnavailable ?? pdbs[0]!.spec!.minAvailable).toBe(1);
    const services = all<IService>('Service').filter((s) => selects(s.spec!.selector, labels));
    expect(services.flatMap((s) => s.spec!.ports ?? [])).toContainEqual(expect.objectContaining({ port: 3000, targetPort: 'http' }));
    // the dashboard is not autoscaled
    expect(all<IScaledObject>('ScaledObject').filter((s) => s.spec.scaleTargetRef.name === 'crawlfleet-dashboard')).toEqual([]);
  });

  if (expected.databases) {
    test('Redis 7 and MongoDB 7 as StatefulSets on volume claims, Redis with noeviction and AOF, the Secret pointing at their Services', () => {
      const redis = one<IStatefulSet>('StatefulSet', 'redis');
      const rc = redis.spec!.template.spec!.containers[0]!;
      expect(rc.image).toMatch(/^redis:7(\.|$|-)/);
      const args = (rc.args ?? rc.command ?? []).join(' ');
      expect(args).toContain('--maxmemory-policy noeviction');
      expect(args).toContain('--appendonly yes');
      expect(args).toMatch(/--maxmemory \d+[kmg]b/);
      expect(rc.readinessProbe?.exec?.command?.join(' ')).toContain('redis-cli ping');
      expect(rc.volumeMounts).toContainEqual(expect.objectContaining({ mountPath: '/data' }));

      const mongo = one<IStatefulSet>('StatefulSet', 'mongo');
      const mc = mongo.spec!.template.spec!.containers[0]!;
      expect(mc.image).toMatch(/^mongo:8\.\d+\.\d+$/);
      expect(mc.readinessProbe?.exec?.command).toEqual(['mongosh', '--quiet', '--eval', "db.adminCommand('ping')"]);
      expect(mc.volumeMounts).toContainEqual(expect.objectContaining({ mountPath: '/data/db' }));

      for (const s of [redis, mongo]) {
        const claims = s.spec!.volumeClaimTemplates ?? [];
        expect(claims).toHaveLength(1);
        expect(s.spec!.template.spec!.containers[0]!.volumeMounts).toContainEqual(expect.objectContaining({ name: claims[0]!.metadata!.name }));
        expect(quantity(claims[0]!.spec!.resources?.requests?.storage)).toBeGreaterThan(0);
        expect(s.spec!.replicas).toBe(1);
        // its governing Service exists and selects it
        const svc = one<IService>('Service', s.spec!.serviceName!);
        expect(selects(svc.spec!.selector, s.spec!.template.metadata?.labels)).toBe(true);
      }

      const secret = secretValues(one<ISecret>('Secret', SECRET));
      // Both with passwords: the ones the Secret gives the stores are the ones in the fleet's URLs.
      expect(args).toContain('--requirepass $(REDIS_PASSWORD)');
      expect(rc.env?.find((e) => e.name === 'REDIS_PASSWORD')?.valueFrom?.secretKeyRef).toEqual({ name: SECRET, key: 'REDIS_PASSWORD' });
      expect(mc.env?.find((e) => e.name === 'MONGO_INITDB_ROOT_PASSWORD')?.valueFrom?.secretKeyRef).toEqual({ name: SECRET, key: 'MONGO_PASSWORD' });
      expect(decodeURIComponent(new URL(secret.REDIS_URL!).password)).toBe(secret.REDIS_PASSWORD);
      expect(decodeURIComponent(new URL(secret.MONGO_URL!).password)).toBe(secret.MONGO_PASSWORD);
      expect(decodeURIComponent(new URL(secret.MONGO_URL!).username)).toBe(secret.MONGO_USER);
      // Only crawlfleet's pods reach them.
      for (const [owner, port] of [
        [redis, 6379],
        [mongo, 27017],
      ] as const) {
        const policies = all<INetworkPolicy>('NetworkPolicy').filter((p) => selects(p.spec!.podSelector?.matchLabels, owner.spec!.template.metadata?.labels));
        expect(policies.map((p) => ({ types: p.spec!.policyTypes, ingress: p.spec!.ingress }))).toEqual([
          { types: ['Ingress'], ingress: [{ from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'crawlfleet' } } }], ports: [{ protocol: 'TCP', port }] }] },
        ]);
      }
      // each URL's host and port is a Service of the overlay that serves that port
      for (const [url, owner] of [
        [secret.REDIS_URL!, redis],
        [secret.MONGO_URL!, mongo],
      ] as const) {
        const { hostname, port } = new URL(url);
        const svc = one<IService>('Service', hostname);
        expect(svc.spec!.ports?.map((p) => p.port)).toContain(Number(port));
        expect(selects(svc.spec!.selector, owner.spec!.template.metadata?.labels)).toBe(true);
      }
    });
  } else {
    test('runs no database: no StatefulSet, no Redis or MongoDB image, and its README says what to provide', () => {
      expect(all('StatefulSet')).toEqual([]);
      const images = podOwners().flatMap((w) => w.spec!.template.spec!.containers.map((c) => c.image));
      expect(images.filter((i) => /^(redis|mongo)\b/.test(i ?? ''))).toEqual([]);
      // the URLs are the operator's, from secrets.env
      expect(secretValues(one<ISecret>('Secret', SECRET)).REDIS_URL).toBe(`rediss://default:${TEST_SECRET}@my-redis.example.net:6380`);
      const readme = readFileSync(join(ROOT, 'infra', 'k8s', 'overlays', overlay, 'README.md'), 'utf8');
      for (const needed of ['noeviction', 'AOF', 'replica set', 'crawlfleet-secrets']) expect(readme).toContain(needed);
    });
  }
});

describe('infra/k8s: what the operator must provide, and the egress of the pods that fetch the web', () => {
  test('an overlay does not build without secrets.env (no placeholder Secret over a real one), nor the large one without image.env and both its images', () => {
    const build = (dir: string, overlay: string) => spawnSync(kustomize(), ['build', join(dir, 'overlays', overlay)], { encoding: 'utf8' });
    const noSecrets = operatorCopy({ image: true });
    const noImage = operatorCopy({ secrets: true });
    const noRendererImage = operatorCopy({ secrets: true, image: true, rendererImage: false });
    try {
      for (const overlay of Object.keys(OVERLAYS)) {
        const r = build(noSecrets, overlay);
        expect({ overlay, status: r.status === 0, error: /secrets\.env/.test(r.stderr) }).toEqual({ overlay, status: false, error: true });
      }
      const r = build(noImage, 'large');
      expect({ status: r.status === 0, error: /image\.env/.test(r.stderr) }).toEqual({ status: false, error: true });
      expect(build(noImage, 'small').status).toBe(0);
      // image.env with the fleet's image alone: the renderers would run an image without Chromium
      const noRenderer = build(noRendererImage, 'large');
      expect({ status: noRenderer.status === 0, error: /RENDERER_IMAGE/.test(noRenderer.stderr) }).toEqual({ status: false, error: true });
    } finally {
      rmSync(noSecrets, { recursive: true, force: true });
      rmSync(noImage, { recursive: true, force: true });
      rmSync(noRendererImage, { recursive: true, force: true });
    }
    // The examples hold replace-me, which crawlfleet refuses at start (test/unit/env-placeholders.test.ts).
    for (const overlay of Object.keys(OVERLAYS)) expect(readFileSync(join(ROOT, 'infra', 'k8s', 'overlays', overlay, 'secrets.env.example'), 'utf8')).toMatch(/^DASHBOARD_PASSWORD=replace-me$/m);
  });

  const egressCases = Object.keys(OVERLAYS).flatMap((overlay) => ['fetcher', 'renderer'].map((component) => [overlay, component] as const));
  test.each(egressCases)("%s: the %ss reach DNS, the data stores and the public web, not the cluster's ranges or 169.254.169.254", (overlay, component) => {
    const objects = render(overlay);
    const policies = objects.filter((o) => o.kind === 'NetworkPolicy') as (INetworkPolicy & K8sObject)[];
    const ownPolicies = (name: string) => {
      const workload = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === name) as IDeployment & K8sObject;
      return policies.filter((p) => selects(p.spec!.podSelector?.matchLabels, workload.spec!.template.metadata?.labels));
    };
    const own = ownPolicies(`crawlfleet-${component}`);
    expect(own).toHaveLength(1);
    // a browser loads what a page asks for: the renderers' wall is the fetchers' own
    expect(own[0]!.spec!.egress).toEqual(ownPolicies('crawlfleet-fetcher')[0]!.spec!.egress);
    const spec = own[0]!.spec!;
    expect(spec.policyTypes).toEqual(['Egress']);
    const rules = spec.egress ?? [];
    // rules without `to` open ports only: DNS and the data stores'
    const portOnly = rules.filter((r) => !r.to).flatMap((r) => (r.ports ?? []).map((p) => `${p.protocol}/${p.port}`));
    expect(portOnly.sort()).toEqual(['TCP/26379', 'TCP/27017', 'TCP/53', 'TCP/6379', 'TCP/6380', 'UDP/53'].sort());
    const blocks = rules.flatMap((r) => r.to ?? []).map((t) => t.ipBlock);
    expect(blocks.every((b) => b !== undefined)).toBe(true);
    const v4 = blocks.find((b) => b!.cidr === '0.0.0.0/0')!;
    for (const range of ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '127.0.0.0/8', '100.64.0.0/10']) expect(v4.except).toContain(range);
    const v6 = blocks.find((b) => b!.cidr === '::/0')!;
    for (const range of ['fc00::/7', 'fe80::/10', '::1/128']) expect(v6.except).toContain(range);
  });
});

describe('infra/k8s/components/monitoring (Prometheus Operator)', () => {
  const objects = () => render('small', ['monitoring']);

  test('ServiceMonitors find the four worker Services on their metrics port and the dashboard with its credentials; every object is valid', () => {
    const all = objects();
    expect(schemaErrors(all)).toEqual([]);
    const monitors = all.filter((o) => o.kind === 'ServiceMonitor') as (IServiceMonitor & K8sObject)[];
    const services = all.filter((o) => o.kind === 'Service') as (IService & K8sObject)[];
    const selected = (m: IServiceMonitor) =>
      services.filter((svc) => {
        const labels = svc.metadata.labels ?? {};
        const sel = m.spec.selector;
        return selects(sel.matchLabels, labels) && (sel.matchExpressions ?? []).every((e) => e.operator === 'In' && (e.values ?? []).includes(labels[e.key] ?? ''));
      });
    const workers = monitors.find((m) => m.metadata.name === 'crawlfleet-workers')!;
    expect(
      selected(workers)
        .map((svc) => svc.metadata.name)
        .sort(),
    ).toEqual(['crawlfleet-fetcher-metrics', 'crawlfleet-parser-metrics', 'crawlfleet-renderer-metrics', 'crawlfleet-writer-metrics']);
    for (const svc of selected(workers)) expect(svc.spec!.ports?.map((p) => p.name)).toContain(workers.spec.endpoints![0]!.port);
    expect(workers.spec.endpoints![0]!.relabelings).toContainEqual(expect.objectContaining({ targetLabel: 'stage' }));
    const dashboard = monitors.find((m) => m.metadata.name === 'crawlfleet-dashboard')!;
    expect(selected(dashboard).map((svc) => svc.metadata.name)).toEqual(['crawlfleet-dashboard']);
    const auth = dashboard.spec.endpoints![0]!.basicAuth!;
    const secret = secretValues(all.find((o) => o.kind === 'Secret') as ISecret & K8sObject);
    expect([auth.username?.name, auth.password?.name]).toEqual([SECRET, SECRET]);
    expect(Object.keys(secret)).toEqual(expect.arrayContaining([auth.username!.key, auth.password!.key]));
  });

  test('the alerts: promtool accepts the rules, and each fires on the series it is for and not on the others', () => {
    const rule = objects().find((o) => o.kind === 'PrometheusRule') as IPrometheusRule & K8sObject;
    const groups = rule.spec!.groups!;
    const names = groups.flatMap((g) => (g.rules ?? []).map((r) => r.alert));
    expect(names).toEqual(['CrawlfleetSinkUnavailable', 'CrawlfleetDeadLettersRising', 'CrawlfleetRedisMemoryNearMax', 'CrawlfleetCrawlNoProgress', 'CrawlfleetBacklogOnlyGrows']);
    const dir = mkdtempSync(join(tmpdir(), 'crawlfleet-rules-'));
    try {
      writeFileSync(join(dir, 'rules.yml'), toYaml({ groups }));
      const checked = spawnSync('promtool', ['check', 'rules', join(dir, 'rules.yml')], { encoding: 'utf8' });
      expect({ status: checked.status, out: checked.stdout + checked.stderr }).toMatchObject({ status: 0 });
      // promtool test rules compares annotations too: the copy under test has none (check rules read them).
      const bare = { groups: groups.map((g) => ({ ...g, rules: (g.rules ?? []).map(({ annotations: _a, ...r }) => r) })) };
      writeFileSync(join(dir, 'bare.yml'), toYaml(bare));
      const alert = (at: string, name: string, labels: Record<string, string>[]) => ({ eval_time: at, alertname: name, exp_alerts: labels.map((l) => ({ exp_labels: l })) });
      const w = { severity: 'warning', namespace: 'c' };
      const tests = {
        rule_files: ['bare.yml'],
        evaluation_interval: '1m',
        tests: [
          {
            interval: '1m',
            input_series: [
              { series: 'crawlfleet_sinks_unavailable{namespace="c",instance="w1"}', values: '0 0 1x20' },
              { series: 'crawlfleet_sinks_unavailable{namespace="c",instance="w2"}', values: '0x22' },
              { series: 'crawlfleet_dead_letters_total{namespace="c",stage="fetch",code="ERR_HTTP_STATUS"}', values: '0+2x60' },
              { series: 'crawlfleet_dead_letters_total{namespace="c",stage="fetch",code="ERR_TIMEOUT"}', values: '0+0.1x60' },
              { series: 'crawlfleet_redis_memory_used_bytes{namespace="c",node="r1:6379"}', values: '900x30' },
              { series: 'crawlfleet_redis_memory_max_bytes{namespace="c",node="r1:6379"}', values: '1000x30' },
              { series: 'crawlfleet_redis_memory_used_bytes{namespace="c",node="r2:6379"}', values: '900x30' },
              { series: 'crawlfleet_redis_memory_max_bytes{namespace="c",node="r2:6379"}', values: '0x30' },
              { series: 'crawlfleet_crawl_running{namespace="c",crawl="stuck",state="running"}', values: '1x80' },
              // progress for 20 minutes, then none
              { series: 'crawlfleet_crawl_fetched_total{namespace="c",crawl="stuck",spider="s"}', values: '0+10x20 200x60' },
              { series: 'crawlfleet_crawl_running{namespace="c",crawl="moving",state="running"}', values: '1x80' },
              { series: 'crawlfleet_crawl_fetched_total{namespace="c",crawl="moving",spider="s"}', values: '0+5x80' },
              { series: 'crawlfleet_queue_backlog{namespace="c",queue="parse"}', values: '0+10x200' },
              { series: 'crawlfleet_queue_backlog{namespace="c",queue="write"}', values: '50x200' },
            ],
            alert_rule_test: [
              alert('12m', 'CrawlfleetSinkUnavailable', [{ ...w, instance: 'w1' }]),
              alert('5m', 'CrawlfleetSinkUnavailable', []),
              alert('40m', 'CrawlfleetDeadLettersRising', [{ ...w, stage: 'fetch', code: 'ERR_HTTP_STATUS' }]),
              alert('20m', 'CrawlfleetRedisMemoryNearMax', [{ severity: 'critical', namespace: 'c', node: 'r1:6379' }]),
              alert('70m', 'CrawlfleetCrawlNoProgress', [{ ...w, crawl: 'stuck' }]),
              alert('45m', 'CrawlfleetCrawlNoProgress', []),
              alert('150m', 'CrawlfleetBacklogOnlyGrows', [{ ...w, queue: 'parse' }]),
              alert('100m', 'CrawlfleetBacklogOnlyGrows', []),
            ],
          },
        ],
      };
      writeFileSync(join(dir, 'tests.yml'), toYaml(tests));
      const tested = spawnSync('promtool', ['test', 'rules', join(dir, 'tests.yml')], { encoding: 'utf8', cwd: dir });
      expect({ status: tested.status, out: tested.status === 0 ? '' : tested.stdout + tested.stderr }).toEqual({ status: 0, out: '' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
