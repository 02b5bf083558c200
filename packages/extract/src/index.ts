export * from './compile.js';
export * from './convert.js';
export * from './extract.js';
export * from './parse-html.js';
export * from './code-hooks.js';
