import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/build.ts'],
    // Suites start real servers and databases on a shared two-core machine: time limits are generous.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
