export * from './host-policy.js';
export * from './proxy-list.js';
export * from './proxy-health.js';
export * from './limiter.js';
export * from './proxy-pool.js';
export * from './robots.js';
export * from './polite-fetch.js';
export * from './proxy-view.js';
