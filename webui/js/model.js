// The offer as the UI uses it: one normalised shape whatever spelling the
// catalog sends (plans as a map keyed by plan id or as an array; plan names
// as "name" or "planName", as the thesis writes both), with costs and
// resource quantities parsed once (on first use) for filtering and sorting.

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
    /** What the filters read, worked out once per plan (filters.js fills it). */
    amounts: {},
    /** When the catalog recorded this plan's last change, and who made it. */
    stamp: { updatedAt: plan.updatedAt ?? null, updatedBy: plan.updatedBy ?? null },
    /** A service plan's hosting policy (Local, Remote, LocalAndRemote); '' on capacity plans. */
    hosting: text(plan.hosting),
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

/**
 * One offer as the UI uses it. What every list pass needs (names, ids,
 * provider, labels, times) is read at once; the plans, with their exactly
 * parsed costs and quantities, are parsed the first time something asks for
 * them (an offer on screen, a quantity filter, or the idle pass the store
 * runs after a snapshot), so a page of 10,000 offers shows its first cards
 * without parsing every quantity first.
 */
export class NormalizedOffer {
  #plans = null;
  #cheapest = undefined;
  #searchText = null;

  constructor(raw) {
    const provider = raw.provider && typeof raw.provider === 'object' ? raw.provider : {};
    this.id = text(raw.id);
    this.name = text(raw.name) || text(raw.id);
    this.type = text(raw.type);
    // What it sells: 'capacity' (absent on the wire) or 'service'.
    this.kind = text(raw.kind) || 'capacity';
    this.description = text(raw.description);
    this.clusterID = text(raw.clusterID ?? provider.clusterID);
    this.clusterName = text(raw.clusterName ?? provider.clusterName);
    this.labels = raw.labels && typeof raw.labels === 'object' && !Array.isArray(raw.labels)
      ? Object.fromEntries(Object.entries(raw.labels).map(([k, v]) => [k, text(v)])) : {};
    // The provider's reported Liqo enforcement and tenant-isolation levels; '' when it never reported one.
    this.enforcement = text(raw.enforcement);
    this.isolation = text(raw.isolation);
    this.version = typeof raw.version === 'number' ? raw.version : Number(raw.version ?? 0) || 0;
    this.createdAt = raw.createdAt ?? null;
    this.updatedAt = raw.updatedAt ?? raw.createdAt ?? null;
    this.raw = raw;
    // Worked out once here, not on every comparison of a sort.
    this.createdMs = timeValue(this.createdAt);
  }

  /** The plans, normalised (parsed on first use). */
  get plans() {
    if (this.#plans === null) {
      const raw = this.raw.plans;
      if (Array.isArray(raw)) {
        this.#plans = raw.map((plan, index) => normalizePlan(plan?.planID ?? plan?.id ?? plan?.name ?? plan?.planName ?? index, plan));
      } else if (raw && typeof raw === 'object') {
        this.#plans = Object.entries(raw).map(([key, plan]) => normalizePlan(key, plan));
      } else {
        this.#plans = [];
      }
    }
    return this.#plans;
  }

  /** Have the plans been parsed yet? */
  get parsed() {
    return this.#plans !== null;
  }

  /** The plan with the lowest valid cost, or null. */
  get cheapest() {
    if (this.#cheapest === undefined) {
      let best = null;
      for (const plan of this.plans) {
        if (plan.costValue && (!best || compareDecimal(plan.costValue, best.costValue) < 0)) best = plan;
      }
      this.#cheapest = best;
    }
    return this.#cheapest;
  }

  /** Lower-case text the search box looks in (names, ids, provider, plan keys and names, labels). */
  get searchText() {
    if (this.#searchText === null) {
      const raw = this.raw.plans;
      const planWords = Array.isArray(raw)
        ? raw.flatMap((p, i) => [text(p?.planID ?? p?.id ?? p?.name ?? p?.planName ?? i), text(p?.name ?? p?.planName)])
        : raw && typeof raw === 'object' ? Object.entries(raw).flatMap(([k, p]) => [k, text(p?.name ?? p?.planName)]) : [];
      this.#searchText = [this.name, this.id, this.type, this.description, this.clusterName, this.clusterID,
        ...planWords, ...Object.entries(this.labels).map(([k, v]) => `${k}=${v}`)].join('\n').toLowerCase();
    }
    return this.#searchText;
  }
}

/** Normalise one offer from the catalog (REST or feed). Returns null if it has no id. */
export function normalizeOffer(raw) {
  if (!raw || typeof raw !== 'object' || raw.id === undefined || raw.id === null) return null;
  return new NormalizedOffer(raw);
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
