export * from './metrics.js';
export * from './liveness.js';
export * from './server.js';
export * from './gauges.js';
