export * from './browser-pool.js';
export * from './chromium-launch.js';
export * from './chromium-scratch.js';
export * from './guard-proxy.js';
export * from './page-renderer.js';
export * from './script-built.js';
export * from './refusal-log.js';
export * from './relay-head.js';
