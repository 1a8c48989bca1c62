// The offer as the UI uses it: one normalised shape whatever spelling the
// catalog sends (plans as a map keyed by plan id or as an array; plan names
// as "name" or "planName", as the thesis writes both), with costs and
// resource quantities parsed once for filtering and sorting.

import { compare as compareDecimal, parseDecimal, parseQuantity } from './quantity.js';

/** Resource names shown first, in this order; any others follow alphabetically. */
export const WELL_KNOWN_RESOURCES = ['cpu', 'memory', 'storage', 'ephemeral-storage', 'nvidia.com/gpu', 'amd.com/gpu', 'pods'];

function text(value) {
  return value === undefined || value === null ? '' : String(value);
}

function tryParse(parse, value) {
  try {
    return parse(value);
  } catch {
    return null;
  }
}

function normalizePlan(key, raw) {
  const plan = raw && typeof raw === 'object' ? raw : {};
  const resources = plan.resources && typeof plan.resources === 'object' ? plan.resources : {};
  const entries = Object.entries(resources).map(([name, value]) => ({
    name,
    value: text(value),
    quantity: tryParse(parseQuantity, text(value)),
  }));
  const costValue = tryParse(parseDecimal, plan.cost);
  const resourceMap = new Map(entries.map((entry) => [entry.name, entry]));
  const number = (q) => (q ? toNumber(q) : null);
  const gpus = entries.filter((e) => e.quantity && (e.name === 'gpu' || e.name.endsWith('/gpu')));
  const costNumber = number(costValue);
  const cpu = number(resourceMap.get('cpu')?.quantity);
  const memoryGiB = resourceMap.get('memory')?.quantity ? toNumber(resourceMap.get('memory').quantity) / 2 ** 30 : null;
  return {
    key: text(key),
    name: text(plan.name ?? plan.planName),
    cost: text(plan.cost),
    costValue,
    resources: entries,
    resourceMap,
    // Plain numbers for the table view's columns and sorting (display, not filtering: filters compare exactly).
    numbers: {
      cost: costNumber,
      cpu,
      memoryGiB,
      gpu: gpus.length ? gpus.reduce((sum, e) => sum + toNumber(e.quantity), 0) : null,
      costPerCpu: costNumber !== null && cpu ? costNumber / cpu : null,
      costPerGiB: costNumber !== null && memoryGiB ? costNumber / memoryGiB : null,
    },
  };
}

/** An exact decimal as a float (for display and sorting only). */
function toNumber(value) {
  return Number(value.coef) * 10 ** value.exp;
}

/** Normalise one offer from the catalog (REST or feed). Returns null if it has no id. */
export function normalizeOffer(raw) {
  if (!raw || typeof raw !== 'object' || raw.id === undefined || raw.id === null) return null;
  let plans = [];
  if (Array.isArray(raw.plans)) {
    plans = raw.plans.map((plan, index) => normalizePlan(plan?.planID ?? plan?.id ?? plan?.name ?? plan?.planName ?? index, plan));
  } else if (raw.plans && typeof raw.plans === 'object') {
    plans = Object.entries(raw.plans).map(([key, plan]) => normalizePlan(key, plan));
  }
  const provider = raw.provider && typeof raw.provider === 'object' ? raw.provider : {};
  const labels = raw.labels && typeof raw.labels === 'object' && !Array.isArray(raw.labels)
    ? Object.fromEntries(Object.entries(raw.labels).map(([k, v]) => [k, text(v)])) : {};
  const offer = {
    id: text(raw.id),
    name: text(raw.name) || text(raw.id),
    type: text(raw.type),
    description: text(raw.description),
    clusterID: text(raw.clusterID ?? provider.clusterID),
    clusterName: text(raw.clusterName ?? provider.clusterName),
    labels,
    version: typeof raw.version === 'number' ? raw.version : Number(raw.version ?? 0) || 0,
    createdAt: raw.createdAt ?? null,
    updatedAt: raw.updatedAt ?? raw.createdAt ?? null,
    plans,
    raw,
  };
  // Worked out once here, not on every keystroke or comparison of a sort.
  offer.createdMs = timeValue(offer.createdAt);
  offer.searchText = [offer.name, offer.id, offer.type, offer.description, offer.clusterName, offer.clusterID,
    ...plans.flatMap((p) => [p.key, p.name]), ...Object.entries(labels).map(([k, v]) => `${k}=${v}`)].join('\n').toLowerCase();
  offer.cheapest = null;
  for (const plan of plans) {
    if (plan.costValue && (!offer.cheapest || compareDecimal(plan.costValue, offer.cheapest.costValue) < 0)) offer.cheapest = plan;
  }
  return offer;
}

/** Resource names across plans: well-known first, then the rest alphabetically. */
export function resourceColumns(plans) {
  const names = new Set();
  for (const plan of plans) for (const entry of plan.resources) names.add(entry.name);
  const known = WELL_KNOWN_RESOURCES.filter((name) => names.has(name));
  const rest = [...names].filter((name) => !WELL_KNOWN_RESOURCES.includes(name)).sort();
  return [...known, ...rest];
}

/** Timestamp in ms for sorting (0 when unknown). */
export function timeValue(value) {
  if (value === null || value === undefined) return 0;
  if (typeof value === 'number') return value < 1e12 ? value * 1000 : value;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? 0 : ms;
}

/** Text order for names and ids: numbers inside compare as numbers ("#12" before "#112"), case-insensitive. */
export const naturalCollator = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });

/** Plans in the order consumers compare them: cheapest first, then by plan ID (natural order). */
export function planOrder(a, b) {
  if (a.costValue && b.costValue) {
    const byCost = compareDecimal(a.costValue, b.costValue);
    if (byCost) return byCost;
  } else if (a.costValue || b.costValue) {
    return a.costValue ? -1 : 1;
  }
  return naturalCollator.compare(a.key, b.key);
}
