export * from './context.js';
export * from './redis-startup.js';
export * from './stage-worker.js';
export * from './deadline.js';
export * from './backpressure.js';
export * from './shutdown.js';
export * from './metrics-server.js';
export * from './reconciler.js';
