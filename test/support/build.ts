// vitest globalSetup: bundles the server once, as `npm start` does, for the suites that run it as a
// process, and the dashboard that every test server serves.
import { execFileSync } from 'node:child_process';

const root = new URL('../..', import.meta.url).pathname;

export default function setup(): void {
  execFileSync('npm', ['run', '-s', 'build'], { cwd: root, stdio: 'inherit' });
}
