// A header a request gives more than once. Node keeps the first of some (Authorization) and joins others
// into `a, b` (Idempotency-Key): either way the server would act on a value the client did not send as one.

/** Whether the request gives the header (its name in lower case) more than once, in any letter case. */
export function givenMoreThanOnce(rawHeaders: string[], lowerCaseName: string): boolean {
  let seen = 0;
  for (let at = 0; at < rawHeaders.length; at += 2) if (rawHeaders[at]!.toLowerCase() === lowerCaseName && ++seen > 1) return true;
  return false;
}
