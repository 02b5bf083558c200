// Each jest worker gets a Redis of its own when the test command started several (REDIS_URLS, one
// per worker): tests already keep to their own key prefixes, but some read the server's own figures
// (used memory, command counts), which another worker's test would move. Runs before a test file's
// modules load, so everything the file starts, child processes included, sees this REDIS_URL.
const urls = (process.env.REDIS_URLS ?? '').split(',').filter((url) => url !== '');
if (urls.length > 0) {
  const worker = Number(process.env.JEST_WORKER_ID ?? '1');
  process.env.REDIS_URL = urls[(worker - 1) % urls.length];
}
