// The plan comparison table of one offer: a row per plan (cheapest first),
// a column for its cost and for each resource any plan provides.

import { h, srOnly, uid } from '../dom.js';
import { toPlainString } from '../quantity.js';
import { planOrder, resourceColumns } from '../model.js';
import { planMatches } from '../filters.js';
import { formatCost } from '../pricing.js';

const COLUMN_LABELS = {
  cpu: 'CPU',
  memory: 'Memory',
  storage: 'Storage',
  'ephemeral-storage': 'Ephemeral storage',
  'nvidia.com/gpu': 'GPU (nvidia.com/gpu)',
  'amd.com/gpu': 'GPU (amd.com/gpu)',
  pods: 'Pods',
};

/**
 * @param {object} offer normalised offer
 * @param {object|null} active parsed filters, to mark matching plans (null: no marking)
 */
export function planTable(offer, active) {
  const plans = [...offer.plans].sort(planOrder);
  const columns = resourceColumns(plans);
  const captionId = uid('caption');
  const marking = Boolean(active);
  const table = h('table', { class: 'plan-table' },
    h('caption', { id: captionId },
      `Plans of ${offer.name}, cheapest first`,
      marking ? '; plans matching your filters are marked' : ''),
    h('thead', {},
      h('tr', {},
        h('th', { scope: 'col', text: 'Plan' }),
        h('th', { scope: 'col', class: 'num', text: 'Cost' }),
        columns.map((name) => h('th', { scope: 'col', class: 'num' },
          COLUMN_LABELS[name] ?? name)),
        marking ? h('th', { scope: 'col', text: 'Matches filters' }) : null)),
    h('tbody', {},
      plans.map((plan) => {
        const matches = marking && planMatches(plan, active);
        return h('tr', { class: matches ? 'is-match' : '', 'data-plan': plan.key },
          h('th', { scope: 'row' },
            h('span', { class: 'plan-key', text: plan.key }),
            plan.name && plan.name !== plan.key ? h('span', { class: 'plan-name', text: plan.name }) : null),
          h('td', { class: 'num', 'data-column': 'cost', 'data-label': 'Cost', text: formatCost(plan.cost) }),
          columns.map((name) => {
            const entry = plan.resourceMap.get(name);
            if (!entry) return h('td', { class: 'num muted', 'data-column': name, 'data-label': COLUMN_LABELS[name] ?? name }, h('span', { 'aria-hidden': 'true', text: '—' }), srOnly('none'));
            const exact = entry.quantity ? toPlainString(entry.quantity) : null;
            return h('td', {
              class: 'num',
              'data-column': name,
              'data-label': COLUMN_LABELS[name] ?? name,
              title: exact && exact !== entry.value ? `exactly ${exact}` : null,
              text: entry.value,
            });
          }),
          marking ? h('td', { 'data-label': 'Matches filters' }, matches ? h('span', { class: 'badge badge--ok', text: 'Matches' }) : h('span', { class: 'muted', text: 'No' })) : null);
      })));
  if (plans.length === 0) {
    return h('p', { class: 'notice', text: 'This offer has no plans yet.' });
  }
  // A focusable, labelled scroll region: on a narrow screen the table scrolls
  // sideways and keyboard users can scroll it too.
  return h('div', { class: 'table-scroll', role: 'region', tabindex: '0', 'aria-labelledby': captionId }, table);
}
