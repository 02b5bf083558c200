import type { IndexRedis } from '../identity-index.js';
import type { EarlierCapture } from './records.js';
import type { CaptureDigests } from './warc-sink.js';

/** The first capture of each payload digest, in a hash in the crawl's slot: digest -> `<date> <uri>`. */
export class RedisCaptureDigests implements CaptureDigests {
  constructor(
    private readonly redis: IndexRedis,
    private readonly key: string,
  ) {}

  async earlier(digests: string[]): Promise<(EarlierCapture | undefined)[]> {
    if (digests.length === 0) return [];
    const values = await this.redis.hmget(this.key, ...digests);
    return values.map((value) => {
      if (!value) return undefined;
      const space = value.indexOf(' ');
      return { date: value.slice(0, space), uri: value.slice(space + 1) };
    });
  }

  async remember(captures: { digest: string; capture: EarlierCapture }[]): Promise<void> {
    if (captures.length === 0) return;
    const pipeline = this.redis.pipeline();
    for (const { digest, capture } of captures) pipeline.hsetnx(this.key, digest, `${capture.date} ${capture.uri}`);
    for (const [err] of (await pipeline.exec()) ?? []) if (err) throw err;
  }

  async clear(): Promise<void> {
    await this.redis.del(this.key);
  }
}
