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

/** "3 of 10 left", "Sold out", or null for a plan without a cap (or not known yet). */
export function unitsText(capacity) {
  if (!capacity || capacity.maxPurchases === null || capacity.maxPurchases === undefined) return null;
  const left = capacity.available ?? Math.max(0, capacity.maxPurchases - capacity.active);
  return left === 0 ? 'Sold out' : `${left} of ${capacity.maxPurchases} left`;
}

/**
 * @param {object} offer normalised offer
 * @param {object|null} active parsed filters, to mark matching plans (null: no marking)
 * @param {object} [buying] { capacity: Map(plan key → capacity), reserve(plan, button) } adds the
 *   units left (where a plan is capped) and a Reserve button per plan
 */
export function planTable(offer, active, buying = null) {
  const plans = [...offer.plans].sort(planOrder);
  const columns = resourceColumns(plans);
  const captionId = uid('caption');
  const marking = Boolean(active);
  const capped = Boolean(buying) && plans.some((plan) => unitsText(buying.capacity.get(plan.key)) !== null);
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
        marking ? h('th', { scope: 'col', text: 'Matches filters' }) : null,
        capped ? h('th', { scope: 'col', text: 'Units left' }) : null,
        buying ? h('th', { scope: 'col' }, h('span', { class: 'visually-hidden', text: 'Buy' })) : null)),
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
          marking ? h('td', { 'data-label': 'Matches filters' }, matches ? h('span', { class: 'badge badge--ok', text: 'Matches' }) : h('span', { class: 'muted', text: 'No' })) : null,
          capped ? h('td', { 'data-label': 'Units left', 'data-column': 'units' }, unitsCell(buying.capacity.get(plan.key))) : null,
          buying ? h('td', { class: 'plan-table__buy' }, reserveButton(plan, buying)) : null);
      })));
  if (plans.length === 0) {
    return h('p', { class: 'notice', text: 'This offer has no plans yet.' });
  }
  // A focusable, labelled scroll region: on a narrow screen the table scrolls
  // sideways and keyboard users can scroll it too.
  return h('div', { class: 'table-scroll', role: 'region', tabindex: '0', 'aria-labelledby': captionId }, table);
}

function unitsCell(capacity) {
  const text = unitsText(capacity);
  if (text === null) return h('span', { class: 'muted', text: 'No limit' });
  return h('span', { class: text === 'Sold out' ? 'badge badge--soldout' : '', text });
}

function reserveButton(plan, buying) {
  const soldOut = unitsText(buying.capacity.get(plan.key)) === 'Sold out';
  const button = h('button', { type: 'button', class: 'button button--small', 'data-reserve': plan.key, disabled: soldOut },
    soldOut ? 'Sold out' : 'Reserve', srOnly(` plan ${plan.name || plan.key}`));
  button.addEventListener('click', () => buying.reserve(plan, button));
  return button;
}
