export * from './address-guard.js';
export * from './user-agents.js';
export * from './body-codec.js';
export * from './classify.js';
export * from './http-client.js';
export * from './sitemap.js';
