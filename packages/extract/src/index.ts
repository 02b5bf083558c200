export * from './compile.js';
export * from './convert.js';
export * from './extract.js';
