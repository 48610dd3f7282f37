// Retries, as a fetch wrapper: 429 is retried for any request (the server did nothing), honouring
// Retry-After; 5xx answers and network errors only for requests that are safe to repeat: GET and HEAD,
// or anything carrying an Idempotency-Key. Bounded, with exponential backoff and full jitter.

export interface RetryOptions {
  /** Retries after the first try; default 3. */
  retries?: number;
  /** First backoff ceiling in ms; it doubles per retry. Default 250. */
  baseDelayMs?: number;
  /** Longest wait in ms, Retry-After included. Default 10,000. */
  maxDelayMs?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function retryingFetch(fetchImpl: typeof fetch, options: RetryOptions = {}): typeof fetch {
  const { retries = 3, baseDelayMs = 250, maxDelayMs = 10_000 } = options;
  const backoff = (attempt: number) => Math.random() * Math.min(maxDelayMs, baseDelayMs * 2 ** attempt);

  return async (input, init) => {
    const request = new Request(input, init);
    const repeatable = request.method === 'GET' || request.method === 'HEAD' || request.headers.has('Idempotency-Key');
    for (let attempt = 0; ; attempt++) {
      const last = attempt >= retries;
      let response: Response;
      try {
        response = await fetchImpl(request.clone());
      } catch (error) {
        if (last || !repeatable) throw error;
        await sleep(backoff(attempt));
        continue;
      }
      if (last) return response;
      if (response.status === 429) {
        const seconds = Number(response.headers.get('retry-after'));
        await sleep(Number.isFinite(seconds) && seconds > 0 ? Math.min(maxDelayMs, seconds * 1000) : backoff(attempt));
        continue;
      }
      if (response.status >= 500 && repeatable) {
        await sleep(backoff(attempt));
        continue;
      }
      return response;
    }
  };
}
