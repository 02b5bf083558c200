import { connect, createServer, type Server, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { MongoClient, MongoServerError } from 'mongodb';
import mongoose from 'mongoose';
import { pino } from 'pino';
import { validateSpider } from '@crawlfleet/core';
import { MongoSink, classifySinkError, closeMongoConnections, isSinkUnavailable, shortAcknowledgement, type SinkErrorKind } from '@crawlfleet/storage';
import { MAX_OUTAGE_WAIT_MS, SinkOutages, outageWaitMs, sinkLabel } from '@crawlfleet/writer';
import { freePort } from '../helpers/ports.js';
import { startMongo, type MongoServer } from '../helpers/mongo.js';

const spider = validateSpider({ name: 's', items: [{ type: 'book', key: 'upc', fields: { upc: { css: 'u' }, price: { css: 'p', type: 'number' } } }] });
const book = (upc: string, price: unknown = 1) => ({ type: 'book', url: `http://h/${upc}`, upc, price, crawlId: 'c', fetchedAt: 't', spider: 's' });

/** Settles `promise` to the error it rejects with (the test fails if it resolves). */
async function errorOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

/**
 * A TCP relay in front of the server whose answers can be held back, then every connection cut:
 * the driver sees a connection closed in the middle of an operation.
 */
async function cuttableRelay(targetPort: number): Promise<{ port: number; hold(): void; cut(): void; close(): Promise<void> }> {
  const sockets: Socket[] = [];
  let holding = false;
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    sockets.push(client, upstream);
    client.on('error', () => undefined).pipe(upstream);
    upstream.on('error', () => undefined).on('data', (d) => !holding && client.write(d));
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return {
    port,
    hold: () => {
      holding = true;
    },
    cut: () => {
      for (const s of sockets) s.destroy();
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('classifySinkError, on real errors of the mongodb driver and mongoose against FerretDB', () => {
  let mongo: MongoServer;
  const errors: Record<string, unknown> = {};

  beforeAll(async () => {
    mongo = await startMongo(`cf_errs_${process.pid}_${Date.now().toString(36)}`);
    if (!mongo.controllable) return;
    const port = Number(new URL(mongo.url).port);

    // While the server answers: faults of the write itself.
    const sink = await MongoSink.open(mongo.url, spider, { batch: { maxItems: 10, maxWaitMs: 10 }, maxHoldMs: 1 });
    await sink.write([book('a')]);
    errors['an item that does not fit its schema (ItemsRejectedError from the sink)'] = await errorOf(sink.write([book('b', 'twelve')]));
    const client = await MongoClient.connect(mongo.url, { serverSelectionTimeoutMS: 2000 });
    await client
      .db()
      .collection('raw')
      .insertOne({ _id: 'k' as never });
    errors['a duplicate key (MongoServerError 11000)'] = await errorOf(
      client
        .db()
        .collection('raw')
        .insertOne({ _id: 'k' as never }),
    );
    const conn = await mongoose.createConnection(mongo.url, { serverSelectionTimeoutMS: 2000 }).asPromise();
    const Model = conn.model('Thing', new mongoose.Schema({ _id: String, n: Number }));
    await Model.insertMany([{ _id: 'x', n: 1 }]);
    errors['a duplicate key in an unordered insertMany (MongoBulkWriteError with writeErrors)'] = await errorOf(
      Model.insertMany(
        [
          { _id: 'x', n: 1 },
          { _id: 'y', n: 2 },
        ],
        { ordered: false, lean: true },
      ),
    );
    errors['a mongoose ValidationError'] = await errorOf(Model.create({ _id: 'z', n: 'abc' }));
    errors['a mongoose CastError'] = await errorOf(Model.find({ n: 'abc' }).exec());

    // A connection closed in the middle of an operation.
    const relay = await cuttableRelay(port);
    const viaRelay = await MongoClient.connect(`mongodb://127.0.0.1:${relay.port}/x`, { serverSelectionTimeoutMS: 2000, heartbeatFrequencyMS: 60_000 });
    relay.hold();
    const pending = errorOf(viaRelay.db().collection('raw').insertOne({ n: 1 }));
    await new Promise((r) => setTimeout(r, 300));
    relay.cut();
    errors['a connection closed mid-operation (MongoNetworkError)'] = await pending;
    await viaRelay.close().catch(() => undefined);
    await relay.close();

    // The server stopped: every way the writer meets it.
    await mongo.stop();
    errors['a query on an open client (MongoServerSelectionError)'] = await errorOf(client.db().collection('raw').findOne({}));
    errors['an unordered insertMany on an open mongoose connection (MongoBulkWriteError, no writeErrors)'] = await errorOf(Model.insertMany([{ _id: 'w', n: 1 }], { ordered: false, lean: true }));
    errors['a batch of an open MongoSink (held 1 ms)'] = await errorOf(sink.write([book('c')]));
    errors['opening a MongoSink (MongooseServerSelectionError)'] = await errorOf(MongoSink.open(mongo.url.replace(/\/[^/]*$/, '/other'), spider));
    const buffered = mongoose.createConnection(mongo.url.replace(/\/[^/]*$/, '/buffered'), { serverSelectionTimeoutMS: 3000 });
    buffered.asPromise().catch(() => undefined);
    errors['an operation buffered by mongoose before its connection opened (buffering timed out)'] = await errorOf(
      buffered
        .model('B', new mongoose.Schema({ n: Number }, { bufferTimeoutMS: 200 }))
        .find({})
        .exec(),
    );
    errors['a refused TCP connection (Node ECONNREFUSED)'] = await new Promise((resolve) => connect(port, '127.0.0.1').on('error', resolve));
    await buffered.destroy(true).catch(() => undefined);
    await client.close().catch(() => undefined);
    await conn.destroy(true).catch(() => undefined);
    await closeMongoConnections();
  }, 120_000);

  afterAll(async () => {
    await mongo?.stop();
  });

  // [what happened, the error's name as the driver or mongoose made it, its kind]
  const cases: [string, string, SinkErrorKind][] = [
    ['an item that does not fit its schema (ItemsRejectedError from the sink)', 'Error', 'data'],
    ['a duplicate key (MongoServerError 11000)', 'MongoServerError', 'data'],
    ['a duplicate key in an unordered insertMany (MongoBulkWriteError with writeErrors)', 'MongoBulkWriteError', 'data'],
    ['a mongoose ValidationError', 'ValidationError', 'data'],
    ['a mongoose CastError', 'CastError', 'data'],
    ['a connection closed mid-operation (MongoNetworkError)', 'MongoNetworkError', 'unavailable'],
    ['a query on an open client (MongoServerSelectionError)', 'MongoServerSelectionError', 'unavailable'],
    ['an unordered insertMany on an open mongoose connection (MongoBulkWriteError, no writeErrors)', 'MongoBulkWriteError', 'unavailable'],
    ['a batch of an open MongoSink (held 1 ms)', 'MongoServerSelectionError', 'unavailable'],
    ['opening a MongoSink (MongooseServerSelectionError)', 'MongooseServerSelectionError', 'unavailable'],
    ['an operation buffered by mongoose before its connection opened (buffering timed out)', 'MongooseError', 'unavailable'],
    ['a refused TCP connection (Node ECONNREFUSED)', 'Error', 'unavailable'],
  ];
  test.each(cases)('%s: %s is %s', (what, name, kind) => {
    if (!mongo.controllable) return; // an external MONGO_URL cannot be stopped by the test
    // (Node's own errors come from another realm than Jest's Error: checked by shape)
    expect(errors[what]).toHaveProperty('name', name);
    expect(classifySinkError(errors[what])).toBe(kind);
    expect(isSinkUnavailable(errors[what])).toBe(kind === 'unavailable');
  });

  test('server states FerretDB cannot show (a primary stepping down, a shutdown), as the driver builds them: unavailable', () => {
    const notPrimary = new MongoServerError({ ok: 0, code: 10107, codeName: 'NotWritablePrimary', errmsg: 'not primary' });
    const shutdown = new MongoServerError({ ok: 0, code: 91, codeName: 'ShutdownInProgress', errmsg: 'The server is in quiesce mode and will shut down' });
    const legacy = new MongoServerError({ ok: 0, errmsg: 'not master' });
    expect([notPrimary, shutdown, legacy].map((e) => classifySinkError(e))).toEqual(['unavailable', 'unavailable', 'unavailable']);
    // A bulk write whose every per-document error is a step-down is the server's state, not the documents'.
    const steppedDown = Object.assign(new Error('bulk'), { name: 'MongoBulkWriteError', writeErrors: [{ code: 189 }, { err: { code: 11602 } }] });
    const mixed = Object.assign(new Error('bulk'), { name: 'MongoBulkWriteError', writeErrors: [{ code: 189 }, { code: 11000 }] });
    expect([classifySinkError(steppedDown), classifySinkError(mixed)]).toEqual(['unavailable', 'data']);
  });

  test('anything it does not know is unknown (ordinary retries, then a dead letter), never unavailable', () => {
    expect(classifySinkError(new Error('the MongoDB flush did not settle within 90000 ms'))).toBe('unknown');
    expect(classifySinkError(Object.assign(new Error('no space left on device'), { code: 'ENOSPC' }))).toBe('unknown');
    expect(classifySinkError(undefined)).toBe('unknown');
    expect(classifySinkError('text')).toBe('unknown');
    const cycle: { cause?: unknown; message: string } = { message: 'loop' };
    cycle.cause = cycle;
    expect(classifySinkError(cycle)).toBe('unknown');
  });
});

describe("the writer's outage decisions", () => {
  test('a parked write job waits about a second first, twice as long each time after, at most 30 s', () => {
    const top = () => 1;
    expect([0, 1, 2, 3, 4, 5, 6, 50].map((d) => outageWaitMs(d, top))).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
    expect(MAX_OUTAGE_WAIT_MS).toBe(30_000);
    // jittered: between half and all of its ceiling
    expect(outageWaitMs(50, () => 0)).toBe(15_000);
  });

  test('an outage is logged once when it starts and once when it ends; the gauge follows', () => {
    const lines: Record<string, unknown>[] = [];
    const log = pino(
      { level: 'info' },
      new Writable({
        write: (chunk, _e, done) => {
          lines.push(JSON.parse(String(chunk)));
          done();
        },
      }),
    );
    const gauge: number[] = [];
    const outages = new SinkOutages(log, (n) => gauge.push(n));
    const mongo = sinkLabel({ kind: 'mongo', url: 'mongodb://u:secret@db:27017/items' }, 'mongodb://unused');
    expect(mongo).not.toContain('secret');
    outages.available(mongo);
    for (let i = 0; i < 500; i++) outages.unavailable(mongo, new Error('connect ECONNREFUSED'), 1000);
    outages.available(mongo);
    outages.available(mongo);
    outages.unavailable(mongo, new Error('again'), 1000);
    expect(lines.map((l) => l.msg)).toEqual([
      'MongoDB unavailable: write jobs are parked without spending attempts until it answers',
      'MongoDB available again: parked write jobs resume',
      'MongoDB unavailable: write jobs are parked without spending attempts until it answers',
    ]);
    expect(lines[1]).toMatchObject({ sink: mongo, parkings: 500 });
    expect(gauge).toEqual([1, 0, 1]);
  });
});

describe('an answer that acknowledged fewer documents than were written', () => {
  it('is an error, held and retried, never counted written; one that keeps coming back spends attempts (unknown, not unavailable)', () => {
    expect(shortAcknowledgement('insert', 3, 3)).toBeUndefined();
    expect(shortAcknowledgement('insert', 3, undefined)).toBeUndefined();
    const short = shortAcknowledgement('lastSeenAt update', 2, 1);
    expect(short?.message).toBe('MongoDB acknowledged 1 of 2 documents of a lastSeenAt update');
    expect(short?.code).toBe('ERR_SINK_SHORT_ACK');
    expect(classifySinkError(short)).toBe('unknown');
  });
});
