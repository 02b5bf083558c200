// What one BullMQ job costs at the least, whatever crawlfleet does around it: N jobs added in
// batches of 50 and run by a worker whose processor does nothing, completed jobs removed at once
// (as crawlfleet's queues do). Prints Redis CPU and commands per job (INFO), and this process's CPU
// per job. Issue #18 reads it against the fleet's per-page cost: a page is 1.5 to 3 jobs.
//
//   REDIS_URL=redis://127.0.0.1:6379 node bench/bullmq-floor.js [jobs=20000] [payload bytes=200]
//
// Use a Redis of its own: it obliterates the queue `bullmq-floor` there, and other clients' work
// would count in Redis's CPU.
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';

const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const connection = { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null };
const jobs = Number(process.argv[2] ?? 20_000);
const payload = 'x'.repeat(Number(process.argv[3] ?? 200));
const admin = new Redis(connection);

async function redisCpuSeconds() {
  const info = await admin.info('cpu');
  const field = (name) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)[1]);
  return field('used_cpu_sys') + field('used_cpu_user');
}
async function commands() {
  return Number(/^total_commands_processed:(\d+)/m.exec(await admin.info('stats'))[1]);
}

const queue = new Queue('bullmq-floor', { connection, defaultJobOptions: { removeOnComplete: { count: 0 } } });
await queue.obliterate({ force: true }).catch(() => {});
const [cpu0, cmd0, client0] = [await redisCpuSeconds(), await commands(), process.cpuUsage()];
for (let i = 0; i < jobs; i += 50) await queue.addBulk(Array.from({ length: Math.min(50, jobs - i) }, (_, j) => ({ name: 'j', data: { p: payload, i: i + j } })));
const [cpu1, cmd1] = [await redisCpuSeconds(), await commands()];
let done = 0;
const finished = new Promise((resolve) => {
  const worker = new Worker('bullmq-floor', async () => {}, { connection, concurrency: 16 });
  worker.on('completed', () => {
    if (++done === jobs) resolve(worker);
  });
});
const worker = await finished;
const [cpu2, cmd2, client] = [await redisCpuSeconds(), await commands(), process.cpuUsage(client0)];
const perJob = (seconds) => Number(((seconds / jobs) * 1e6).toFixed(1));
console.log(
  JSON.stringify({
    jobs,
    payloadBytes: payload.length,
    redisMicrosPerJob: { add: perJob(cpu1 - cpu0), run: perJob(cpu2 - cpu1), total: perJob(cpu2 - cpu0) },
    redisCommandsPerJob: { add: (cmd1 - cmd0) / jobs, run: (cmd2 - cmd1) / jobs },
    clientMicrosPerJob: perJob((client.user + client.system) / 1e6),
  }),
);
await worker.close();
await queue.obliterate({ force: true });
await queue.close();
admin.disconnect();
