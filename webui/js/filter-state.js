// The consumer's filter and sort choices, kept while the page is open so
// opening an offer and coming back keeps them (and the plan table can mark
// the plans that match).

import { emptyFilters } from './filters.js';

export const filterState = {
  raw: emptyFilters(),
  sort: 'newest',
};

export function resetFilters() {
  filterState.raw = emptyFilters();
}
