// A part a describe block shares among its tests (a server, a relay, a worker): started before the
// block's tests (beforeAll) and stopped after them (afterAll, in the reverse order of the starts).
// The block gets a stand-in at once, which reaches the started part while the block runs.
import { afterAll, beforeAll } from 'vitest';

export function forTheBlock<T extends object>(what: string, start: () => Promise<T>, stop: (started: T) => Promise<unknown>): T {
  let started: T | undefined;
  beforeAll(async () => {
    started = await start();
  });
  afterAll(async () => {
    if (started) await stop(started);
    started = undefined;
  });
  const current = (): T => {
    if (!started) throw new Error(`${what} is used outside the tests of the describe block that starts it`);
    return started;
  };
  return new Proxy({} as T, {
    get(_, key) {
      if (key === 'then') return undefined; // not a promise, whether started or not
      const part = current();
      const value = Reflect.get(part, key, part);
      return typeof value === 'function' ? value.bind(part) : value;
    },
    set: (_, key, value) => Reflect.set(current(), key, value),
    has: (_, key) => Reflect.has(current(), key),
  });
}
