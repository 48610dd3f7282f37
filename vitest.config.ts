import { configDefaults, defineConfig } from 'vitest/config';

// Suites start real servers and databases on a shared two-core machine, often busy with other work: a
// time limit is a last resort against a hang, so it is generous.
const shared = {
  testTimeout: 120_000,
  hookTimeout: 120_000,
  // expect.poll waits on a condition; its default of one second is a guess a busy machine breaks.
  expect: { poll: { timeout: 60_000 } },
};

// The fast tier (`npm run test:fast`, on SQLite alone): the unit tests and the HTTP suites against an
// in-process server. The rest runs the server as a process (to kill, starve or stop it, or end to end),
// runs outside programs (git, redocly, npm, podman, Chromium, the resend SDK), stalls the server, or
// attacks it at length.
const slowServerSuites = [
  'crash', 'fanout-crash', 'webhooks-crash', 'delivery-thread', 'process', 'shutdown', 'idempotency', 'resilience',
  'broadcast-delivery', 'what-happened', 'store-footprint', 'workflows', 'timeouts',
];
const fast = [`test/!(client-package|spec-diff).test.ts`, `test/server/!(${slowServerSuites.join('|')}).test.ts`];

export default defineConfig({
  test: {
    globalSetup: ['test/support/build.ts'],
    // Two files at a time (vitest's default on two cores is one): a suite spends most of its time
    // waiting on servers, relays and timers, and each uses its own ports, files and schema. The fast
    // tier alone runs three (`--maxWorkers=3` in `npm run test:fast`): its suites wait more still.
    maxWorkers: 2,
    projects: [
      // Its files share each worker's modules rather than each loading the server afresh: every suite
      // starts its own server, store and ports all the same.
      { test: { name: 'fast', include: fast, isolate: false, ...shared } },
      {
        test: {
          name: 'slow',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...fast],
          globalSetup: ['test/support/client-package.ts'],
          ...shared,
        },
      },
    ],
  },
});
