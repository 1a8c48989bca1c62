// A provider's operations on the plans of one offer, folded under the offer
// in "Your offers": each plan's cap (units that may be held at once; empty
// for no cap), what is held now (unexpired reservations plus purchases, from
// the catalog's capacity endpoint), how many are bought (its active
// contracts, where the catalog has contracts), and when the plan was last
// updated and by whom (the provider agent or the provider), as the catalog
// recorded it.

import { planCapacity, setPlanCapacity } from '../api.js';
import { formatTime, h, replaceChildren, srOnly } from '../dom.js';
import { planOrder } from '../model.js';
import { stampText, writtenHere } from '../plan-activity.js';
import { handleExpiredSession } from './provider.js';

/**
 * @param {object} offer    normalised offer (the provider's own)
 * @param {object} options  { ctx, session, open: Set of offer ids whose plans are shown, bought: Map("offer/plan" → count) | null }
 */
export function planOps(initialOffer, { ctx, session, open, bought }) {
  let offer = initialOffer;
  const body = h('div', { class: 'plan-ops__body' });
  const details = h('details', { class: 'plan-ops', 'data-plan-ops': offer.id },
    h('summary', {}, 'Plans, caps and sales', srOnly(` of ${offer.name}`)),
    body);
  details.open = open.has(offer.id);
  details.addEventListener('toggle', () => {
    if (details.open) {
      open.add(offer.id);
      load();
    } else {
      open.delete(offer.id);
    }
  });

  const messages = new Map(); // plan key -> the last cap answer, kept across reloads of the table
  async function load() {
    const plans = [...offer.plans].sort(planOrder);
    const written = writtenHere(offer) ? 'from this page' : 'by another client (the provider agent, or another page)';
      const capacity = new Map(await Promise.all(plans.map((p) => planCapacity(offer.id, p.key).then((c) => [p.key, c], () => [p.key, null]))));
    const focused = body.contains(document.activeElement) ? document.activeElement.dataset?.cap : undefined;
    replaceChildren(body,
      h('p', { class: 'muted', text: `Last written ${formatTime(offer.updatedAt)}, ${written}.` }),
      h('div', { class: 'table-scroll', role: 'region', tabindex: '0', 'aria-label': `Plans of ${offer.name}` },
        h('table', { class: 'plan-table ops-table' },
          h('thead', {}, h('tr', {},
            h('th', { scope: 'col', text: 'Plan' }),
            h('th', { scope: 'col', text: 'Cap' }),
            h('th', { scope: 'col', class: 'num', text: 'Held now' }),
            h('th', { scope: 'col', class: 'num', text: 'Bought' }),
            h('th', { scope: 'col', text: 'Last updated' }))),
          h('tbody', {}, plans.map((plan) => planRow(plan, capacity.get(plan.key)))))));
    if (focused !== undefined) body.querySelector(`[data-cap="${CSS.escape(focused)}"]`)?.focus();
  }

  /** A newer version of the offer, while this row is kept (it holds the focus). */
  details.refresh = (newer) => {
    offer = newer;
    if (details.open) load();
  };

  function planRow(plan, cap) {
    const input = h('input', {
      type: 'number', min: '0', step: '1', inputmode: 'numeric', 'data-cap': plan.key,
      value: cap?.maxPurchases ?? '', 'aria-label': `Cap of plan ${plan.name || plan.key} (empty: no cap)`,
    });
    const status = h('span', { class: 'cap-status', role: 'status', text: messages.get(plan.key) ?? '' });
    const save = h('button', { type: 'submit', class: 'button button--secondary button--small' }, 'Set cap', srOnly(` of plan ${plan.name || plan.key}`));
    const form = h('form', { class: 'cap-form', novalidate: true }, input, save, status);
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const text = input.value.trim();
      const value = text === '' ? null : Number(text);
      if (value !== null && !(Number.isInteger(value) && value >= 0 && value <= 1000000)) {
        status.textContent = 'Enter a whole number from 0 to 1000000, or leave it empty for no cap.';
        input.setAttribute('aria-invalid', 'true');
        return;
      }
      input.removeAttribute('aria-invalid');
      save.disabled = true;
      try {
        const answer = await setPlanCapacity(offer.id, plan.key, value, session.token);
        messages.set(plan.key, value === null ? 'No cap.' : `Cap set: ${answer?.available ?? '?'} left.`);
        await load();
        details.querySelector(`[data-cap="${CSS.escape(plan.key)}"]`)?.focus();
      } catch (err) {
        if (err.status === 401) {
          handleExpiredSession(ctx);
          return;
        }
        status.textContent = `Not saved: ${err.message}`;
        messages.delete(plan.key);
      } finally {
        save.disabled = false;
      }
    });
    const changed = stampText(plan.stamp);
    const soldCount = bought?.get(`${offer.id}/${plan.key}`) ?? 0;
    return h('tr', { 'data-plan': plan.key },
      h('th', { scope: 'row', text: plan.name || plan.key }),
      h('td', {}, form),
      h('td', { class: 'num', 'data-column': 'held', text: cap ? String(cap.active) : '?' }),
      h('td', { class: 'num', 'data-column': 'bought', text: bought ? String(soldCount) : '—' }),
      h('td', { 'data-column': 'changed', 'data-by': changed?.by ?? '', title: changed?.title ?? '' },
        changed ? h('time', { datetime: plan.stamp.updatedAt, text: changed.text }) : '—'));
  }

  if (details.open) load();
  return details;
}
