export * from './counters.js';
export * from './registry.js';
export * from './lifecycle.js';
export * from './control.js';
export * from './status.js';
export * from './fetch-jobs.js';
export * from './reconcile.js';
export * from './replay.js';
