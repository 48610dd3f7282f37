// Reply-to in a form: one text field of addresses separated by commas, for broadcasts and templates alike.

export const replyToText = (addresses?: string[] | null): string => addresses?.join(', ') ?? '';

/** As the API takes it: one address, several, or none (undefined). */
export function replyToValue(text: string): string | string[] | undefined {
  // Split at commas outside a quoted name: `"Doe, Jane" <jane@example.com>` is one address.
  const addresses = (text.match(/(?:"(?:[^"\\]|\\.)*"?|[^,"])+/g) ?? []).map((address) => address.trim()).filter(Boolean);
  return addresses.length === 0 ? undefined : addresses.length === 1 ? addresses[0] : addresses;
}
