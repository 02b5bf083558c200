import { createHash } from 'node:crypto';
import type { Stage } from './keys.js';

/**
 * The fingerprint of a URL within a crawl: a hash of the crawl id and the canonical URL. It keys the
 * frontier, and with a stage letter in front it is the BullMQ job id (never all digits, never `:`),
 * so every enqueue of the same URL is the same job.
 */
export function urlFingerprint(crawlId: string, canonicalUrl: string): string {
  return createHash('sha1').update(crawlId).update('\n').update(canonicalUrl).digest('hex').slice(0, 32);
}

const STAGE_LETTER: Record<Stage, string> = { fetch: 'f', parse: 'p', write: 'w' };

export function jobId(stage: Stage, fingerprint: string): string {
  return `${STAGE_LETTER[stage]}${fingerprint}`;
}

/** Job ids of a stage carry the URL's fingerprint after the stage letter. */
export function fingerprintOfJob(id: string): string {
  return id.slice(1);
}
