// The compact table view of the consumer list: one row per plan that meets
// the filters, with sortable columns (cost, CPU, memory, GPUs, cost per
// CPU and per GiB of memory). Column headers are buttons; the sorted one
// carries aria-sort. Costs show with their currency and period.

import { h, srOnly } from '../dom.js';
import { formatCost } from '../pricing.js';
import { naturalCollator } from '../model.js';

export const COLUMNS = [
  { key: 'offer', label: 'Offer', text: true },
  { key: 'provider', label: 'Provider', text: true },
  { key: 'plan', label: 'Plan', sortable: false },
  { key: 'cost', label: 'Cost' },
  { key: 'cpu', label: 'CPU' },
  { key: 'memoryGiB', label: 'Memory (GiB)' },
  { key: 'gpu', label: 'GPUs' },
  { key: 'costPerCpu', label: 'Cost per CPU' },
  { key: 'costPerGiB', label: 'Cost per GiB' },
];

/** Rows ([{ offer, plan }]) in the order `tableSort` ("cost", "-cpu", …) asks for; rows without the value go last. */
export function sortRows(rows, tableSort) {
  const descending = tableSort.startsWith('-');
  const key = tableSort.replace(/^-/, '');
  const sign = descending ? -1 : 1;
  const textOf = key === 'offer' ? (r) => r.offer.name : key === 'provider' ? (r) => r.offer.clusterName || r.offer.clusterID : null;
  return rows.sort((a, b) => {
    if (textOf) return sign * naturalCollator.compare(textOf(a), textOf(b)) || naturalCollator.compare(a.plan.key, b.plan.key);
    const x = a.plan.numbers[key];
    const y = b.plan.numbers[key];
    if (x === null && y === null) return naturalCollator.compare(a.offer.name, b.offer.name);
    if (x === null) return 1;
    if (y === null) return -1;
    return sign * (x - y) || naturalCollator.compare(a.offer.name, b.offer.name) || naturalCollator.compare(a.plan.key, b.plan.key);
  });
}

const numberFormat = new Intl.NumberFormat(undefined, { maximumSignificantDigits: 4 });

function amount(value) {
  return value === null ? null : numberFormat.format(value);
}

/**
 * The table of `rows` (one page). `onSort(key)` is called with the column a
 * header button asks to sort by.
 */
export function offerTable(rows, tableSort, onSort) {
  const sortedKey = tableSort.replace(/^-/, '');
  const descending = tableSort.startsWith('-');
  const header = COLUMNS.map((column) => {
    const numeric = !column.text && column.key !== 'plan';
    if (column.sortable === false) return h('th', { scope: 'col', text: column.label });
    const sorted = column.key === sortedKey;
    const next = sorted && !descending ? `-${column.key}` : column.key;
    return h('th', { scope: 'col', class: numeric ? 'num' : '', 'aria-sort': sorted ? (descending ? 'descending' : 'ascending') : null },
      h('button', { type: 'button', class: 'sort-button', 'data-sort': column.key, onclick: () => onSort(next) },
        column.label,
        h('span', { class: 'sort-mark', 'aria-hidden': 'true', text: sorted ? (descending ? ' ▼' : ' ▲') : '' }),
        srOnly(sorted ? (descending ? ', sorted high to low; sort low to high' : ', sorted low to high; sort high to low') : ', sort by this')));
  });
  const cell = (column, value, text) => h('td', { class: 'num', 'data-column': column, 'data-label': COLUMNS.find((c) => c.key === column).label },
    value === null ? [h('span', { 'aria-hidden': 'true', text: '—' }), srOnly('none')] : text);
  return h('div', { class: 'table-scroll', role: 'region', tabindex: '0', 'aria-label': 'Plans of the offers shown, one row each' },
    h('table', { class: 'plan-table offer-table' },
      h('thead', {}, h('tr', {}, header)),
      h('tbody', {}, rows.map(({ offer, plan }) => {
        const n = plan.numbers;
        return h('tr', { 'data-offer-id': offer.id, 'data-plan': plan.key },
          h('th', { scope: 'row' }, h('a', { href: `#/offer/${encodeURIComponent(offer.id)}`, text: offer.name })),
          h('td', { 'data-label': 'Provider' }, h('a', { href: `#/providers/${encodeURIComponent(offer.clusterID)}`, text: offer.clusterName || offer.clusterID })),
          h('td', { 'data-label': 'Plan', text: plan.name || plan.key }),
          cell('cost', n.cost, formatCost(plan.cost)),
          cell('cpu', n.cpu, plan.resourceMap.get('cpu')?.value),
          cell('memoryGiB', n.memoryGiB, amount(n.memoryGiB)),
          cell('gpu', n.gpu, amount(n.gpu)),
          cell('costPerCpu', n.costPerCpu, amount(n.costPerCpu)),
          cell('costPerGiB', n.costPerGiB, amount(n.costPerGiB)));
      }))));
}
