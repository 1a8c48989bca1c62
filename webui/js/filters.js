// What the consumer's filters mean, as pure functions over normalised offers.
// An offer matches when at least one of its plans satisfies every active
// filter at once (a consumer buys one plan, so "4 CPUs" from one plan and
// "8Gi" from another would not serve them). Quantities compare exactly.

import { add, compare, compareQuick, isNegative, parseDecimal, parseQuantity, shortQuantityProblem, ZERO } from './quantity.js';

function sumOf(entries) {
  return entries.reduce((sum, entry) => add(sum, entry.quantity), ZERO);
}

/**
 * The resource filters. `amount(plan)` is what the plan provides (null when
 * it provides none); GPUs are counted across vendors' "<vendor>/gpu" names.
 */
export const RESOURCE_FILTERS = [
  {
    key: 'cpu', label: 'CPU', hint: 'e.g. 2, 500m',
    amount: (plan) => plan.resourceMap.get('cpu')?.quantity ?? null,
  },
  {
    key: 'memory', label: 'Memory', hint: 'e.g. 4Gi, 8G',
    amount: (plan) => plan.resourceMap.get('memory')?.quantity ?? null,
  },
  {
    key: 'storage', label: 'Storage', hint: 'e.g. 100Gi',
    amount: (plan) => {
      const found = ['storage', 'ephemeral-storage']
        .map((name) => plan.resourceMap.get(name)?.quantity)
        .filter(Boolean);
      if (found.length === 0) return null;
      return found.reduce((best, q) => (compare(q, best) > 0 ? q : best));
    },
  },
  {
    key: 'gpu', label: 'GPUs', hint: 'e.g. 1',
    amount: (plan) => {
      const gpus = plan.resources.filter((entry) => entry.quantity && (entry.name === 'gpu' || entry.name.endsWith('/gpu')));
      return gpus.length === 0 ? null : sumOf(gpus);
    },
  },
];

/** The empty filter state. */
export function emptyFilters() {
  return { q: '', provider: '', labels: '', type: '', maxCost: '', min: Object.fromEntries(RESOURCE_FILTERS.map((f) => [f.key, ''])) };
}

/**
 * Label conditions typed as "tier=gold, region=eu" (commas or spaces
 * between them). Returns { labels: [[key, value]], error }.
 */
export function parseLabels(text) {
  const labels = [];
  for (const part of String(text ?? '').split(/[,\s]+/).filter(Boolean)) {
    const at = part.indexOf('=');
    if (at <= 0) return { labels: [], error: `Write key=value (not “${part}”)` };
    labels.push([part.slice(0, at), part.slice(at + 1)]);
  }
  return { labels, error: null };
}

/**
 * Parse the raw filter inputs. Returns { active, errors } where `active` holds
 * parsed values for the valid, non-empty filters and `errors` maps a field
 * ("maxCost", "min.cpu", …) to a message. Invalid filters are not applied.
 */
export function parseFilters(raw) {
  const errors = {};
  const words = String(raw.q ?? '').toLowerCase().split(/\s+/).filter(Boolean);
  const { labels, error: labelError } = parseLabels(raw.labels);
  if (labelError) errors.labels = labelError;
  const active = { q: words, provider: raw.provider || '', labels, type: raw.type || '', maxCost: null, min: {} };
  const maxCost = (raw.maxCost ?? '').trim();
  if (maxCost !== '') {
    try {
      const value = parseDecimal(maxCost);
      if (isNegative(value)) errors.maxCost = 'Must be zero or more';
      else active.maxCost = value;
    } catch {
      errors.maxCost = 'Not a number (e.g. 1.5)';
    }
  }
  for (const filter of RESOURCE_FILTERS) {
    const input = (raw.min?.[filter.key] ?? '').trim();
    if (input === '') continue;
    try {
      const value = parseQuantity(input);
      if (isNegative(value)) errors[`min.${filter.key}`] = 'Must be zero or more';
      else active.min[filter.key] = value;
    } catch {
      errors[`min.${filter.key}`] = shortQuantityProblem(input);
    }
  }
  return { active, errors };
}

/** True when no filter would hide anything. */
export function isUnfiltered(active) {
  return !active.type && !active.maxCost && Object.keys(active.min).length === 0
    && !(active.q?.length) && !active.provider && !(active.labels?.length);
}

/** What `plan` provides for `filter`, worked out once per plan and kept on it. */
function amountOf(plan, filter) {
  const cache = plan.amounts;
  if (!cache) return filter.amount(plan);
  let value = cache[filter.key];
  if (value === undefined) {
    value = filter.amount(plan);
    cache[filter.key] = value;
  }
  return value;
}

/** Does this plan satisfy the cost and resource filters? */
export function planMatches(plan, active) {
  if (active.maxCost) {
    if (!plan.costValue || compareQuick(plan.costValue, active.maxCost) > 0) return false;
  }
  for (const filter of RESOURCE_FILTERS) {
    const wanted = active.min[filter.key];
    if (!wanted) continue;
    const provided = amountOf(plan, filter);
    if (!provided || compareQuick(provided, wanted) < 0) return false;
  }
  return true;
}

/** Does the offer have the type and at least one plan satisfying the filters? */
export function offerMatches(offer, active) {
  if (active.type && offer.type !== active.type) return false;
  if (active.provider && offer.clusterID !== active.provider) return false;
  if (active.labels?.length && !active.labels.every(([k, v]) => offer.labels?.[k] === v)) return false;
  if (active.q?.length) {
    const text = offer.searchText ?? `${offer.name} ${offer.id} ${offer.type} ${offer.description} ${offer.clusterName}`.toLowerCase();
    if (!active.q.every((word) => text.includes(word))) return false;
  }
  const plansFiltered = active.maxCost || Object.keys(active.min).length > 0;
  if (!plansFiltered) return true;
  return offer.plans.some((plan) => planMatches(plan, active));
}

/** The cheapest plan cost of an offer (null when no plan has a valid cost). */
export function lowestCost(offer) {
  if ('cheapest' in offer) return offer.cheapest;
  let best = null;
  for (const plan of offer.plans) {
    if (plan.costValue && (!best || compare(plan.costValue, best.costValue) < 0)) best = plan;
  }
  return best;
}
