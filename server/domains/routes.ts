// Domains: register one (its DKIM key made here, its records answered), list, retrieve, change its
// settings, delete, verify (a check of its DNS records, made by the DomainChecker), and rotate its key.
import type { OperationHandler } from '../api.ts';
import { invalid, notFound } from '../http/errors.ts';
import { cursorOf, listing } from '../http/paging.ts';
import type { StreamedLists } from '../http/streamedList.ts';
import type { DomainRecord } from '../store/domains.ts';
import type { Store } from '../store/index.ts';
import type { Handlers } from '../http/operationRouter.ts';
import type { DomainChecker } from './checker.ts';
import { DomainAlreadyRegistered, Domains } from './domains.ts';

/** `lists` writes the list asked for without `limit`. */
export function domainHandlers(store: Store, domains: Domains, checker: Pick<DomainChecker, 'soon'> | undefined, lists: StreamedLists): Handlers {
  const streamDomains = lists.of('DomainList', (domain: DomainRecord) => domains.toSummary(domain));

  const createDomain: OperationHandler<'createDomain'> = async (req, res) => {
    try {
      res.status(201).json(domains.toDomain(await domains.create(req.body)));
    } catch (error) {
      if (error instanceof DomainAlreadyRegistered) throw invalid(`The domain \`${error.message}\` is registered already.`);
      throw error;
    }
  };

  const listDomains: OperationHandler<'listDomains'> = async (req, res) => {
    const { limit } = req.query;
    const cursor = cursorOf(req.query);
    if (limit === undefined) return listing('domain', () => streamDomains(res, store.domains.stream(cursor)));
    const page = await listing('domain', () => store.domains.page(limit, cursor));
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map((domain) => domains.toSummary(domain)) });
  };

  const getDomain: OperationHandler<'getDomain'> = async (req, res) => {
    const domain = await store.domains.find(req.params.domain_id);
    if (!domain) throw notFound('Domain');
    res.json(domains.toDomain(domain));
  };

  const updateDomain: OperationHandler<'updateDomain'> = async (req, res) => {
    const domain = await domains.update(req.params.domain_id, req.body);
    if (!domain) throw notFound('Domain');
    res.json({ object: 'domain', id: domain.id });
  };

  const deleteDomain: OperationHandler<'deleteDomain'> = async (req, res) => {
    if (!(await domains.delete(req.params.domain_id))) throw notFound('Domain');
    res.json({ object: 'domain', id: req.params.domain_id, deleted: true });
  };

  const verifyDomain: OperationHandler<'verifyDomain'> = async (req, res) => {
    const domain = await domains.startCheck(req.params.domain_id);
    if (!domain) throw notFound('Domain');
    checker?.soon();
    res.json({ object: 'domain', id: domain.id });
  };

  const rotateDomainDkimKey: OperationHandler<'rotateDomainDkimKey'> = async (req, res) => {
    const domain = await domains.rotateKey(req.params.domain_id);
    if (!domain) throw notFound('Domain');
    res.json(domains.toDomain(domain));
  };

  return { createDomain, listDomains, getDomain, updateDomain, deleteDomain, verifyDomain, rotateDomainDkimKey };
}
