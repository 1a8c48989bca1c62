// "My reservations and purchases": the signed-in consumer's live
// reservations (with the time each has left), contracts (with their state)
// and what ended, each linking to its page; and the consumer's service
// instances as the catalog lists them (service-instances.js: the same from
// every browser), each linking to its steps.

import { listContracts, listReservations, listServiceInstances } from '../api.js';
import { formatTime, h, replaceChildren } from '../dom.js';
import { boughtByAutoscaler, formatCost, formatPricedCost } from '../pricing.js';
import { countdownText } from './reservation.js';
import { recordOf } from '../service-instances.js';
import { consumerSessionExpired, requireConsumer } from './sign-in.js';

/** A service instance's `state`, in words. */
const SERVICE_STATE_TEXT = {
  provisioning: 'being set up',
  ready: 'ready',
  updating: 'being updated',
  failed: 'failed',
  deprovisioning: 'being removed',
};

export function mountMine(main, ctx) {
  const session = requireConsumer(ctx, 'Sign in to see your reservations and purchases.');
  if (!session) return null;
  document.title = 'My reservations and purchases · Liqo resource catalog';
  let disposed = false;
  let ticker = null;
  let last = null;
  const flash = ctx.flash;
  ctx.flash = null;
  const body = h('div', { class: 'mine' }, h('p', { class: 'notice', 'aria-busy': 'true', text: 'Loading…' }));
  replaceChildren(main,
    h('div', { class: 'view-header' },
      h('h1', { text: 'My reservations and purchases' }),
      h('p', { class: 'signed-in' }, 'Signed in as ', h('strong', { text: session.name }), '.')),
    flash ? h('p', { class: `notice ${flash.kind === 'error' ? 'notice--error' : 'notice--ok'}`, role: 'status', 'data-flash': flash.kind, text: flash.text }) : null,
    body);

  const planLabel = (r) => {
    const offer = ctx.store.get(r.offerID);
    const plan = offer?.plans.find((p) => p.key === r.planID);
    return `${offer?.name ?? r.offerID} · ${plan?.name || r.planID}`;
  };

  function section(title, id, items, empty) {
    return h('section', { 'aria-labelledby': id, class: 'mine__section' },
      h('h2', { id, text: title }),
      items.length ? h('ul', { class: 'holdings', 'data-list': id }, items) : h('p', { class: 'muted', text: empty }));
  }

  function render(records, contracts, services) {
    clearInterval(ticker);
    const now = Date.now();
    const reserved = records.filter((r) => r.state === 'reserved' && Date.parse(r.expiresAt) > now);
    const contractById = new Map((contracts ?? []).map((c) => [c.id, c]));
    const bought = records.filter((r) => r.state === 'purchased');
    const ended = records.filter((r) => !reserved.includes(r) && !bought.includes(r))
      .sort((a, b) => Date.parse(b.endedAt ?? b.createdAt) - Date.parse(a.endedAt ?? a.createdAt)).slice(0, 20);
    const timers = [];
    const reservedItems = reserved.map((r) => {
      const left = h('span', { class: 'countdown' });
      timers.push(() => { left.textContent = countdownText(Date.parse(r.expiresAt) - Date.now()); });
      return h('li', { 'data-id': r.id },
        h('a', { href: `#/reservation/${encodeURIComponent(r.id)}`, text: planLabel(r) }),
        h('span', { class: 'muted' }, ` · ${formatCost(r.cost)} · `, left, ' left to buy'));
    });
    const boughtItems = bought.map((r) => {
      const c = contractById.get(r.id);
      // The contract's own unit when the catalog says it ("1.5 EUR/hour").
      const cost = c ? formatPricedCost(c.cost, c.pricing) : formatCost(r.cost);
      return h('li', { 'data-id': r.id },
        h('a', { href: `#/contract/${encodeURIComponent(r.id)}`, text: planLabel(r) }),
        boughtByAutoscaler(c?.boughtBy) ? [' ', h('span', { class: 'badge badge--autoscaler', 'data-badge': 'autoscaler', title: c.boughtBy, text: 'autoscaler' })] : null,
        h('span', { class: 'muted', text: ` · ${cost} · bought ${formatTime(r.purchasedAt)}${c ? ` · ${c.state}${c.expiresAt ? `, until ${formatTime(c.expiresAt)}` : ''}` : ''}` }));
    });
    const endedItems = ended.map((r) => h('li', { 'data-id': r.id },
      h('span', { text: planLabel(r) }),
      h('span', { class: 'muted', text: ` · ${r.state}${r.endedAt ? ` ${formatTime(r.endedAt)}` : ''}` })));
    const serviceItems = (services ?? []).map((v) => recordOf(v, ctx.store)).map((r) => h('li', { 'data-id': r.id, 'data-state': r.state },
      h('a', { href: `#/service-instance/${encodeURIComponent(r.id)}`, text: `${r.offerName} · ${r.planName}` }),
      h('span', { class: 'muted', text: ` · ${SERVICE_STATE_TEXT[r.state] ?? r.state}${r.hosting ? ` · ${r.hosting}` : ''} · requested ${formatTime(r.createdAt)}` })));
    replaceChildren(body,
      serviceItems.length ? section('Services', 'mine-services', serviceItems, '')
        : services === null ? h('p', { class: 'notice notice--warning', 'data-state': 'services-unavailable', text: 'Your services could not be listed; reload to try again.' }) : null,
      section('Reserved', 'mine-reserved', reservedItems, 'No live reservation. Open an offer and reserve a plan to buy it.'),
      section('Bought', 'mine-bought', boughtItems, 'Nothing bought yet.'),
      endedItems.length ? section('Ended', 'mine-ended', endedItems, '') : null,
      h('p', {}, h('a', { href: '#/', text: 'Browse offers' })));
    if (timers.length) {
      const tick = () => timers.forEach((t) => t());
      tick();
      ticker = setInterval(tick, 1000);
    }
  }

  (async () => {
    try {
      const [records, contracts, services] = await Promise.all([
        listReservations(session.token),
        listContracts(session.token).catch(() => null),
        // A catalog without the route (older) or unreachable for it: the rest still shows.
        listServiceInstances(session.token).catch((err) => (err.status === 404 ? [] : null)),
      ]);
      last = [records, contracts, services];
      if (!disposed) render(...last);
    } catch (err) {
      if (disposed) return;
      if (err.status === 401) consumerSessionExpired(ctx);
      else replaceChildren(body, h('p', { class: 'notice notice--error', role: 'alert', text: `Could not load your reservations: ${err.message}` }));
    }
  })();
  // The services are named from the offers: once those arrive (or change), name them again.
  const onStore = () => { if (last && !disposed) render(...last); };
  ctx.store.addEventListener('change', onStore);
  return () => {
    disposed = true;
    clearInterval(ticker);
    ctx.store.removeEventListener('change', onStore);
  };
}
