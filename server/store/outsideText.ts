// Text that comes from outside (a relay's reply, a bounce report, a webhook endpoint's answer) is
// kept, not refused as a request's text is (server/storableText.ts): what a store would not keep as
// given becomes U+FFFD. That is NUL, which PostgreSQL refuses in text, and lone surrogates. Without
// this, a reply carrying a NUL failed every attempt to record its outcome on PostgreSQL, and with it
// the other outcomes recorded in the same transaction.
export const keptText = (text: string): string => text.replace(/[\u0000\p{Cs}]/gu, '\uFFFD');
