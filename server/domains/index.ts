// What the HTTP server holds of sending domains (server/domains/): their operations, the rules on
// who sends from where, and the checks of their records.
import type { Logger } from 'pino';
import type { DomainOptions } from '../config.ts';
import type { Store } from '../store/index.ts';
import { DomainChecker } from './checker.ts';
import { Domains } from './domains.ts';
import { Senders } from './senders.ts';

export interface SendingDomains {
  domains: Domains;
  senders: Senders;
  /** Absent where nothing checks records (a server that does not start its checker). */
  checker?: DomainChecker;
}

export function sendingDomains(store: Store, options: DomainOptions, logger: Logger): Required<SendingDomains> {
  const domains = new Domains(store.domains, options);
  return { domains, senders: new Senders(store.domains, options, logger), checker: new DomainChecker(store.domains, domains, logger, options) };
}
