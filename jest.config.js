/** Jest on native ESM (run with --experimental-vm-modules); ts-jest only transpiles, `npm run typecheck` checks types. */
const transform = { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/test/tsconfig.json' }] };
const common = {
  testEnvironment: '<rootDir>/test/helpers/cpu-environment.cjs',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform,
  setupFiles: ['<rootDir>/test/helpers/worker-redis.cjs'],
};
// Timeouts bound a hang, not the machine's speed: a test asserts on its results, and prints the time
// its work took. On a loaded or slower machine the same work takes two or three times as long.
export default {
  testTimeout: 360_000,
  testSequencer: '<rootDir>/test/helpers/sequencer.cjs',
  // The tiers (`npm run test:unit`, `test:services`, `test:e2e`): pure logic on plain data and real
  // pages, no server; one Redis or one FerretDB, no fleet; the fleet end to end, its processes and sites.
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    { ...common, displayName: 'services', testMatch: ['<rootDir>/test/services/**/*.test.ts'] },
    { ...common, displayName: 'e2e', testMatch: ['<rootDir>/test/e2e/**/*.test.ts'], testTimeout: 360_000 },
  ],
};
