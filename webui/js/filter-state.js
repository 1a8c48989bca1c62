// The consumer's whole view state and its form in the address, so a
// reload keeps it and a link shares or bookmarks it:
//   #/?q=gpu&provider=<clusterID>&label.tier=gold&type=gpu&maxCost=2&cpu=4
//      &sort=cost&view=table&tsort=-costPerCpu&page=2
// (label.<key>=<value> as the catalog's /offers spells label filters). Also
// kept while the page is open so an opened offer can mark the matching plans.

import { emptyFilters, parseLabels, RESOURCE_FILTERS } from './filters.js';

export const SORT_KEYS = ['newest', 'cost', 'name', 'provider'];
export const VIEWS = ['cards', 'table'];
/** Sortable columns of the table view. */
export const TABLE_COLUMNS = ['offer', 'provider', 'cost', 'cpu', 'memoryGiB', 'gpu', 'costPerCpu', 'costPerGiB'];

export const filterState = {
  raw: emptyFilters(),
  sort: 'newest',
  view: 'cards',
  /** Table sort: a column, "-" in front for descending. */
  tableSort: 'cost',
  page: 1,
};

/** Clear every filter (a provider's own page keeps its provider). */
export function resetFilters({ keepProvider = false } = {}) {
  const provider = filterState.raw.provider;
  filterState.raw = emptyFilters();
  if (keepProvider) filterState.raw.provider = provider;
  filterState.page = 1;
}

/** Set the state from the address's query (anything absent is at its default). */
export function readQuery(params) {
  const raw = emptyFilters();
  raw.q = params.get('q') ?? '';
  raw.provider = params.get('provider') ?? '';
  raw.labels = [...params.entries()].filter(([k]) => k.startsWith('label.') && k.length > 6).map(([k, v]) => `${k.slice(6)}=${v}`).join(', ');
  raw.type = params.get('type') ?? '';
  raw.maxCost = params.get('maxCost') ?? '';
  for (const f of RESOURCE_FILTERS) raw.min[f.key] = params.get(f.key) ?? '';
  filterState.raw = raw;
  const sort = params.get('sort');
  filterState.sort = SORT_KEYS.includes(sort) ? sort : 'newest';
  const view = params.get('view');
  filterState.view = VIEWS.includes(view) ? view : 'cards';
  const tsort = params.get('tsort') ?? '';
  filterState.tableSort = TABLE_COLUMNS.includes(tsort.replace(/^-/, '')) ? tsort : 'cost';
  const page = Number.parseInt(params.get('page') ?? '1', 10);
  filterState.page = Number.isSafeInteger(page) && page > 0 ? page : 1;
}

/** The state as a query string ("" when everything is at its default). */
export function queryString({ withProvider = true } = {}) {
  const params = new URLSearchParams();
  const { raw, sort, view, tableSort, page } = filterState;
  if (raw.q.trim()) params.set('q', raw.q.trim());
  if (withProvider && raw.provider) params.set('provider', raw.provider);
  const { labels, error } = parseLabels(raw.labels);
  if (!error) for (const [k, v] of labels) params.append(`label.${k}`, v);
  if (raw.type) params.set('type', raw.type);
  if (raw.maxCost) params.set('maxCost', raw.maxCost);
  for (const f of RESOURCE_FILTERS) if (raw.min[f.key]) params.set(f.key, raw.min[f.key]);
  if (sort !== 'newest') params.set('sort', sort);
  if (view !== 'cards') params.set('view', view);
  if (view === 'table' && tableSort !== 'cost') params.set('tsort', tableSort);
  if (page > 1) params.set('page', String(page));
  const text = params.toString();
  return text ? `?${text}` : '';
}
