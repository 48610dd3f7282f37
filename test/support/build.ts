// vitest globalSetup: bundles the server once, as `npm start` does, for the suites that run it as a process.
import { execFileSync } from 'node:child_process';

export default function setup(): void {
  execFileSync('npm', ['run', '-s', 'build'], { cwd: new URL('../..', import.meta.url).pathname, stdio: 'inherit' });
}
