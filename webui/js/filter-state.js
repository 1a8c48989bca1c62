// The consumer's view state (filters, sort) and its form in the address:
// `#/?type=gpu&maxCost=2&cpu=4&sort=cost`, so a reload keeps it and a link
// shares or bookmarks it. Also kept while the page is open so the plan
// table of an opened offer can mark the plans that match.

import { emptyFilters, RESOURCE_FILTERS } from './filters.js';

export const SORT_KEYS = ['newest', 'cost', 'name', 'provider'];

export const filterState = {
  raw: emptyFilters(),
  sort: 'newest',
};

export function resetFilters() {
  filterState.raw = emptyFilters();
}

/** Set the state from the address's query (anything absent is empty). */
export function readQuery(params) {
  const raw = emptyFilters();
  raw.type = params.get('type') ?? '';
  raw.maxCost = params.get('maxCost') ?? '';
  for (const f of RESOURCE_FILTERS) raw.min[f.key] = params.get(f.key) ?? '';
  filterState.raw = raw;
  const sort = params.get('sort');
  filterState.sort = SORT_KEYS.includes(sort) ? sort : 'newest';
}

/** The state as a query string ("" when everything is at its default). */
export function queryString() {
  const params = new URLSearchParams();
  const { raw, sort } = filterState;
  if (raw.type) params.set('type', raw.type);
  if (raw.maxCost) params.set('maxCost', raw.maxCost);
  for (const f of RESOURCE_FILTERS) if (raw.min[f.key]) params.set(f.key, raw.min[f.key]);
  if (sort !== 'newest') params.set('sort', sort);
  const text = params.toString();
  return text ? `?${text}` : '';
}
