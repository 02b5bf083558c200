import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { CounterName, CounterIncrements } from '@crawlfleet/crawl';

/**
 * Each status counter has a metric of its own, incremented where the crawl's counter is, so a
 * Prometheus sum over the fleet's workers equals the counters of the crawls they served (a job that
 * runs again after a crash counts again here, never in Redis).
 */
export const COUNTER_METRICS: Record<CounterName, { name: string; help: string }> = {
  seen: { name: 'crawlfleet_urls_seen_total', help: 'URLs admitted to a frontier' },
  fetched: { name: 'crawlfleet_pages_fetched_total', help: 'URLs that got a final HTTP response' },
  parsed: { name: 'crawlfleet_pages_parsed_total', help: 'pages that went through extraction' },
  items: { name: 'crawlfleet_items_parsed_total', help: 'items extracted' },
  written: { name: 'crawlfleet_items_written_total', help: 'items durably stored in a sink' },
  invalid: { name: 'crawlfleet_items_invalid_total', help: 'items dropped as invalid' },
  failed: { name: 'crawlfleet_urls_failed_total', help: 'URLs given up on, each in a dead-letter set' },
  blocked: { name: 'crawlfleet_blocks_total', help: 'responses classified as blocks' },
  retries: { name: 'crawlfleet_retries_total', help: 'retry attempts' },
  // A gauge: a URL skipped as too deep and admitted later by a shorter path takes one back.
  skipped: { name: 'crawlfleet_urls_skipped', help: 'URLs refused by robots.txt, scope or limits (net, as this process changed the counter)' },
  deferred: { name: 'crawlfleet_deferrals_total', help: 'times a job was parked to wait for its host, its proxy or its item store' },
  redirected: { name: 'crawlfleet_urls_redirected_total', help: 'URLs that redirected to another origin' },
  reconciled: { name: 'crawlfleet_jobs_reconciled_total', help: 'lost jobs the reconciler rebuilt (their URL fetched again)' },
  replayed: { name: 'crawlfleet_dead_letters_replayed_total', help: 'dead letters sent back to the fetch stage by `crawlfleet replay`' },
  archived: { name: 'crawlfleet_pages_archived_total', help: "fetched URLs whose exchange went into the crawl's WARC files" },
  notModified: { name: 'crawlfleet_pages_not_modified_total', help: 'recrawled URLs answered 304 Not Modified' },
  unchanged: { name: 'crawlfleet_pages_unchanged_total', help: 'recrawled URLs whose body was the one of their last visit' },
  rendered: { name: 'crawlfleet_pages_rendered_total', help: 'pages loaded and rendered in a browser (the render stage)' },
  renderSkipped: { name: 'crawlfleet_pages_render_skipped_total', help: 'pages `render: "auto"` judged from their plain HTML and parsed without a browser' },
};

const statusClass = (status: number) => `${Math.floor(status / 100)}xx`;

/** A process's metrics: prom-client's defaults (CPU, memory, event-loop lag) and the fleet's own. */
/** prom-client's default gauges whose names end in _total (a counter's suffix). */
const MISNAMED_DEFAULT_METRICS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

export class FleetMetrics {
  readonly registry = new Registry();
  private readonly counters = new Map<string, Counter | Gauge>();
  private readonly responses: Counter<'status_class'>;
  private readonly fetchSeconds: Histogram<'status_class'>;
  private readonly downloadedBytes: Counter;
  private readonly fetchErrors: Counter<'code'>;
  private readonly deadLetters: Counter<'stage' | 'code'>;
  private readonly batchSize: Histogram;
  private readonly batchSeconds: Histogram;
  private readonly unavailableSinks: Gauge;
  private readonly renderRequests: Counter<'outcome'>;
  private readonly sessionsBegun: Counter;
  private readonly sessionsRetired: Counter<'reason'>;

  constructor(labels: Record<string, string> = {}) {
    this.registry.setDefaultLabels(labels);
    // Node's own metrics under their standard names (process_cpu_seconds_total, nodejs_heap_size_used_bytes),
    // which Prometheus users' dashboards and alerts already know.
    collectDefaultMetrics({ register: this.registry });
    // Except prom-client's three gauges named like counters, which Prometheus's linter (promtool check
    // metrics) refuses; the same counts stay, by type, in nodejs_active_handles and its siblings.
    for (const name of MISNAMED_DEFAULT_METRICS) this.registry.removeSingleMetric(name);
    const registers = [this.registry];
    for (const [counter, m] of Object.entries(COUNTER_METRICS)) {
      this.counters.set(counter, m.name.endsWith('_total') ? new Counter({ name: m.name, help: m.help, registers }) : new Gauge({ name: m.name, help: m.help, registers }));
    }
    this.responses = new Counter({
      name: 'crawlfleet_http_responses_total',
      help: 'HTTP responses to page requests, by status class (retried ones included)',
      labelNames: ['status_class'],
      registers,
    });
    this.fetchSeconds = new Histogram({
      name: 'crawlfleet_fetch_duration_seconds',
      help: 'time from request to the whole body, by status class',
      labelNames: ['status_class'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.downloadedBytes = new Counter({ name: 'crawlfleet_downloaded_bytes_total', help: 'response bytes downloaded (decompressed)', registers });
    this.fetchErrors = new Counter({ name: 'crawlfleet_fetch_errors_total', help: 'page requests that got no response, by error code', labelNames: ['code'], registers });
    this.deadLetters = new Counter({ name: 'crawlfleet_dead_letters_total', help: 'jobs dead-lettered, by stage and code', labelNames: ['stage', 'code'], registers });
    this.batchSize = new Histogram({ name: 'crawlfleet_write_batch_items', help: 'items per sink flush', buckets: [1, 10, 50, 100, 250, 500, 1000, 5000], registers });
    this.batchSeconds = new Histogram({
      name: 'crawlfleet_write_batch_duration_seconds',
      help: 'time to flush a batch to the sink, retries included',
      buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 5, 30],
      registers,
    });
    this.renderRequests = new Counter({
      name: 'crawlfleet_render_subrequests_total',
      help: "requests rendered pages' scripts and documents made besides their navigation: sent, blocked by resource type (render.block), refused past render.maxRequestsPerPage",
      labelNames: ['outcome'],
      registers,
    });
    this.sessionsBegun = new Counter({ name: 'crawlfleet_sessions_begun_total', help: 'sessions (one identity on one host: proxy, profile, cookies) this process began', registers });
    this.sessionsRetired = new Counter({
      name: 'crawlfleet_sessions_retired_total',
      help: 'sessions this process retired, by reason: blocked, age, uses (limits reached), room (the host had its maximum)',
      labelNames: ['reason'],
      registers,
    });
    this.unavailableSinks = new Gauge({ name: 'crawlfleet_sinks_unavailable', help: 'item stores this writer finds unavailable now (its write jobs are parked until they answer)', registers });
  }

  /** Counts a job's counter increments (the ones finishJob or delayJob applied to the crawl). */
  count(increments: CounterIncrements): void {
    for (const [name, n] of Object.entries(increments)) if (n) this.counters.get(name)?.inc(n);
  }

  response(status: number, seconds: number, bytes: number): void {
    const labels = { status_class: statusClass(status) };
    this.responses.inc(labels);
    this.fetchSeconds.observe(labels, seconds);
    this.downloadedBytes.inc(bytes);
  }

  fetchError(code: string): void {
    this.fetchErrors.inc({ code });
  }

  deadLetter(stage: string, code: string): void {
    this.deadLetters.inc({ stage, code });
  }

  writeBatch(items: number, seconds: number): void {
    this.batchSize.observe(items);
    this.batchSeconds.observe(seconds);
  }

  /** What one rendered page's scripts asked for. */
  renderedPage(stats: { requests: number; blocked: number; overBudget: number }): void {
    this.renderRequests.inc({ outcome: 'sent' }, stats.requests);
    this.renderRequests.inc({ outcome: 'blocked' }, stats.blocked);
    this.renderRequests.inc({ outcome: 'over_budget' }, stats.overBudget);
  }

  /** What one request did to the fleet's sessions. */
  sessions(events: { began: number; retired: readonly string[] }): void {
    if (events.began) this.sessionsBegun.inc(events.began);
    for (const reason of events.retired) this.sessionsRetired.inc({ reason });
  }

  /** How many item stores this writer finds unavailable now (0 when all answer). */
  sinksUnavailable(count: number): void {
    this.unavailableSinks.set(count);
  }
}
