// Apart from errors.ts so that the delivery thread, which quotes addresses, does not load the contract.
/**
 * A value the caller sent, quoted for a message: in backticks like field names, unless it holds a
 * backtick itself (or is empty), when JSON quotes keep the message unambiguous.
 */
export const quoted = (value: string): string => (value === '' || value.includes('`') ? JSON.stringify(value) : `\`${value}\``);
