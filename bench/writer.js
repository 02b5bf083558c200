// The writer benchmark: items per second into MongoDB through MongoSink (batched, unordered,
// content-hashed, cast by mongoose against the item type's schema) for a few batch sizes, beside a
// plain insertMany loop on the same server; and the CPU time of the mongoose cast alone.
import { MongoClient } from 'mongodb';
import { validateSpider } from '@crawlfleet/core';
import { MongoSink, castItem, closeMongoConnections, itemSchema } from '@crawlfleet/storage';

const ITEMS = Number(process.env.BENCH_WRITER_ITEMS ?? 5000);

// The items' fields, typed: the sink's schema is strict, so every field an item has is declared.
const SPIDER = {
  name: 'bench',
  items: [{ type: 'book', key: 'upc', fields: { upc: { css: 'x' }, title: { css: 'x' }, price: { css: 'x', type: 'number' }, tags: { css: 'x', all: true } } }],
};

/** Milliseconds of CPU per 1,000 items for the cast each flush does (castItem), best of 5 rounds. */
function castCostPer1000() {
  const schema = itemSchema(validateSpider(SPIDER).items[0]);
  const data = items('cast');
  let best = Infinity;
  for (let round = 0; round < 6; round++) {
    const t = performance.now();
    for (const item of data) if (castItem(schema, item).reason) throw new Error('a bench item does not fit its schema');
    if (round > 0) best = Math.min(best, performance.now() - t); // round 0 warms up
  }
  return (best / data.length) * 1000;
}

function items(run) {
  return Array.from({ length: ITEMS }, (_, i) => ({
    type: 'book',
    url: `http://h/${run}/${i}`,
    upc: `${run}-${i}`,
    title: `Book ${i}`,
    price: i / 100,
    tags: ['a', 'b'],
    spider: 'bench',
    crawlId: run,
    fetchedAt: new Date().toISOString(),
  }));
}

export async function benchWriter(mongoUrl) {
  const client = await MongoClient.connect(mongoUrl);
  const results = { items: ITEMS, baseline: {}, sink: {}, castMsPer1000: Number(castCostPer1000().toFixed(2)) };
  console.log(`writer: the mongoose cast costs ${results.castMsPer1000} ms of CPU per 1,000 items`);
  try {
    for (const batch of [100, 500, 1000]) {
      const db = `bench_writer_${Date.now().toString(36)}`;
      const url = mongoUrl.replace(/\/[^/?]*(\?|$)/, `/${db}$1`);
      // baseline: insertMany in chunks of `batch`
      const col = client.db(db).collection('plain');
      let data = items(`plain-${batch}`);
      let t = performance.now();
      for (let i = 0; i < data.length; i += batch) await col.insertMany(data.slice(i, i + batch), { ordered: false });
      const plain = ITEMS / ((performance.now() - t) / 1000);
      // crawlfleet: many concurrent write() calls sharing batched flushes, as the writer stage does
      const spider = validateSpider(SPIDER);
      const sink = await MongoSink.open(url, spider, { batch: { maxItems: batch, maxWaitMs: 50 } });
      data = items(`sink-${batch}`);
      t = performance.now();
      const perJob = 2;
      await Promise.all(Array.from({ length: ITEMS / perJob }, (_, j) => sink.write(data.slice(j * perJob, j * perJob + perJob))));
      const ours = ITEMS / ((performance.now() - t) / 1000);
      await sink.close();
      results.baseline[batch] = Math.round(plain);
      results.sink[batch] = Math.round(ours);
      console.log(`writer batch ${String(batch).padStart(4)}: MongoSink ${Math.round(ours)} items/s, insertMany ${Math.round(plain)} items/s, ratio ${(ours / plain).toFixed(2)}`);
      await client.db(db).dropDatabase();
    }
  } finally {
    await client.close();
    await closeMongoConnections();
  }
  return results;
}
