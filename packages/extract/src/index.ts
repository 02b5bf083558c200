export * from './compile.js';
export * from './convert.js';
export * from './extract.js';
export * from './extract-json.js';
export * from './json-path.js';
export * from './parse-html.js';
export * from './code-hooks.js';
export * from './response.js';
