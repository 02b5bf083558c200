// Preloaded into crawlfleet's processes by the benchmark (NODE_OPTIONS=--require): counts the
// requests each process sends to Redis, one per socket write to the Redis port. ioredis writes a
// plain command, a whole pipeline and a whole MULTI/EXEC block in one write each, and the client
// then waits for the reply: one write is one round trip. At exit, "pid count" is appended to
// BENCH_REDIS_REQUESTS_FILE.
const net = require('node:net');
const { appendFileSync } = require('node:fs');

const port = Number(process.env.BENCH_REDIS_PORT);
const file = process.env.BENCH_REDIS_REQUESTS_FILE;
const isRedis = Symbol('isRedis');
let requests = 0;
const write = net.Socket.prototype.write;
net.Socket.prototype.write = function countedWrite(...args) {
  // the peer is looked up once per socket (getpeername is a system call)
  if (this[isRedis] === undefined && this.remotePort !== undefined) this[isRedis] = this.remotePort === port;
  if (this[isRedis]) requests++;
  return write.apply(this, args);
};
process.on('exit', () => appendFileSync(file, `${process.pid} ${requests}\n`));
