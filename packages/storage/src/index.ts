export * from './batcher.js';
export * from './sink.js';
export * from './formats.js';
export * from './file-sink.js';
export * from './open-sink.js';
export * from './mongo-sink.js';
export * from './export.js';
export * from './item-schema.js';
