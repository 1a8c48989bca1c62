// The consumer's service instances ("my deployments"), as the catalog
// lists them (`GET /service-instances`, from its own OSB records): the same
// from every browser the consumer signs in on. Each becomes the record the
// pages show — names from the offer in the live store, what the instance
// and its binding stand at from the catalog. Nothing is kept in the
// browser: what earlier versions kept in localStorage (ids, the binding's
// namespace and Secret name) is all in the catalog's records, so that key
// is dropped (removed) the first time this module loads.

import { getServiceInstance, listServiceInstances } from './api.js';
import { namespaceNamed } from './service-steps.js';

/** Where earlier versions kept the instances this browser provisioned. */
const OLD_KEY = 'catalog.service-instances';

try {
  localStorage.removeItem(OLD_KEY);
} catch {
  // Storage denied: there is nothing of ours in it then.
}

/** The page's phase for a catalog `state`. */
const PHASE = { provisioning: 'provisioning', ready: 'ready', updating: 'ready', failed: 'failed', deprovisioning: 'deprovisioning' };

/** The binding the page follows: the newest the catalog lists (deleted ones are not listed). */
function bindingOf(view) {
  const b = (view.bindings ?? []).at(-1);
  if (!b) return null;
  return {
    id: b.id,
    operation: b.lastOperation?.operation ?? null,
    namespace: b.parameters?.namespace ?? '',
    secretName: b.parameters?.secretName ?? '',
    state: b.state,
    words: b.lastOperation?.description ?? '',
  };
}

/** A listed instance (`view`) as the pages show it; `store` names its offer and plan. */
export function recordOf(view, store) {
  const offer = store?.get(view.offerID);
  const plan = offer?.plans.find((p) => p.key === view.planID);
  const op = view.lastOperation ?? null;
  return {
    id: view.id,
    offerID: view.offerID,
    offerName: offer?.name ?? view.offerID,
    planKey: view.planID,
    planName: plan?.name || view.planID,
    hosting: plan?.hosting ?? '',
    providerClusterID: view.clusterID ?? offer?.clusterID ?? '',
    providerName: offer?.clusterName ?? '',
    serviceID: view.osb?.serviceID,
    planID: view.osb?.planID,
    contractID: view.contractID ?? null,
    createdAt: view.createdAt,
    state: view.state,
    phase: PHASE[view.state] ?? 'ready',
    operation: op?.operation ?? null,
    operationType: op?.type ?? null,
    words: op?.description ?? '',
    instanceNamespace: op?.type === 'provision' ? namespaceNamed(op.description) : null,
    binding: bindingOf(view),
  };
}

/** The consumer's service instances, newest first, as records. */
export async function instancesOf(token, store) {
  return (await listServiceInstances(token)).map((v) => recordOf(v, store));
}

/** One instance as a record; an ApiError 404 when the catalog has none of the consumer's by that id. */
export async function instanceRecord(token, store, id) {
  return recordOf(await getServiceInstance(id, token), store);
}
