export * from './canonical.js';
export * from './scope.js';
export * from './admission.js';
