// One offer opened: who provides it (name, cluster ID) and the comparison
// table of its plans. Follows the live feed: a change redraws the table and
// a withdrawal says so instead of leaving stale data on screen.

import { formatTime, h, replaceChildren, srOnly } from '../dom.js';
import { parseFilters } from '../filters.js';
import { filterState, queryString } from '../filter-state.js';
import { planCapacity, reserve } from '../api.js';
import { consumerSession } from '../consumer-session.js';
import { planTable } from './plan-table.js';
import { SELF_CHECKS } from '../self-checks.js';
import { consumerSessionExpired, requireConsumer } from './sign-in.js';
import { serviceBadge } from '../service.js';

/** How often the units left of capped plans are read again while the offer is open. */
const CAPACITY_POLL_MS = 3000;

/** The levels the provider's self-checks reported (Liqo enforcement, tenant isolation), among the facts. */
function selfCheckFacts(offer) {
  return SELF_CHECKS.map(({ field, title, of }) => {
    const { label, tone } = of(offer[field]);
    return h('div', {}, h('dt', { text: title }),
      h('dd', { 'data-field': field }, h('span', { class: `badge badge--${tone}`, text: label })));
  });
}

/** What each of those levels means for a buyer, after the facts. */
function selfCheckExplanations(offer) {
  return SELF_CHECKS.map(({ field, of }) => {
    const { label, explain } = of(offer[field]);
    return h('p', { class: 'self-check-explain', 'data-field': `${field}-explain` },
      h('strong', { text: `${label}: ` }), explain);
  });
}

export function mountOfferDetail(main, ctx, [id]) {
  const { store } = ctx;
  const body = h('div', { class: 'offer-detail' });
  const notice = h('div', { class: 'notice-slot', role: 'alert' });
  replaceChildren(main,
    h('p', { class: 'back-link' }, h('a', { href: `#/${queryString()}` }, h('span', { 'aria-hidden': 'true', text: '← ' }), 'All offers')),
    notice,
    body);
  let lastOffer = null;
  const capacity = new Map(); // plan key -> { maxPurchases, active, available }
  const buyError = h('div', { class: 'notice-slot', role: 'alert' });
  const buying = {
    capacity,
    async reserve(plan, button) {
      const session = requireConsumer(ctx, 'Sign in to reserve a plan.');
      if (!session) return;
      button.disabled = true;
      buyError.replaceChildren();
      try {
        const r = await reserve(id, plan.key, session.token);
        ctx.navigate(`#/reservation/${encodeURIComponent(r.id)}`);
      } catch (err) {
        button.disabled = false;
        if (err.status === 401) {
          consumerSessionExpired(ctx);
          return;
        }
        const text = err.status === 409 ? `Plan ${plan.name || plan.key} is sold out: every unit is reserved or bought.` : `Could not reserve: ${err.message}`;
        replaceChildren(buyError, h('p', { class: 'notice notice--error', text }));
        refreshCapacity();
      }
    },
  };

  // Units left change with other consumers' reservations, which the offer feed does not carry: read them again while open.
  let capacityTimer = null;
  let capacityKey = '';
  async function refreshCapacity() {
    const offer = store.get(id);
    if (!offer) return;
    const answers = await Promise.all(offer.plans.map((plan) => planCapacity(id, plan.key).then((c) => [plan.key, c], () => [plan.key, null])));
    const key = JSON.stringify(answers);
    if (key === capacityKey) return;
    capacityKey = key;
    capacity.clear();
    for (const [plan, c] of answers) if (c) capacity.set(plan, c);
    render();
  }
  function scheduleCapacity() {
    clearTimeout(capacityTimer);
    capacityTimer = setTimeout(async () => {
      if (document.visibilityState === 'visible') await refreshCapacity().catch(() => {});
      scheduleCapacity();
    }, CAPACITY_POLL_MS);
  }

  function render() {
    const offer = store.get(id);
    if (!offer) {
      if (!store.loaded) {
        replaceChildren(body, h('h1', { text: 'Offer' }), h('p', { class: 'notice', 'aria-busy': 'true', text: 'Loading offer…' }));
        return;
      }
      if (lastOffer) {
        replaceChildren(notice, h('p', { class: 'notice notice--warning', 'data-state': 'withdrawn' },
          h('strong', { text: 'This offer was withdrawn. ' }),
          'Its provider removed it from the catalog; what you see below is how it was. ',
          h('a', { href: '#/', text: 'Back to all offers' })));
        body.classList.add('is-withdrawn');
        return;
      }
      document.title = 'Offer not found · Liqo resource catalog';
      replaceChildren(body,
        h('h1', { text: 'Offer not found' }),
        h('section', { class: 'notice', 'data-state': 'not-found' },
          h('p', {}, 'There is no offer with the ID ', h('code', { text: id }), ' in this catalog. It may have been withdrawn.'),
          h('p', {}, h('a', { href: '#/', text: 'See all current offers' }))));
      return;
    }
    lastOffer = offer;
    notice.replaceChildren();
    body.classList.remove('is-withdrawn');
    document.title = `${offer.name} · Liqo resource catalog`;
    const { active } = parseFilters(filterState.raw);
    const planFiltered = Boolean(active.maxCost) || Object.keys(active.min).length > 0;
    const headingHadFocus = document.activeElement?.tagName === 'H1' && body.contains(document.activeElement);
    const focusedReserve = body.contains(document.activeElement) ? document.activeElement.dataset?.reserve : undefined;
    replaceChildren(body,
      h('div', { class: 'view-header' },
        h('h1', { tabindex: '-1', text: offer.name }),
        offer.type ? h('p', {}, h('span', { class: 'badge badge--type' }, srOnly('Type: '), offer.type), serviceBadge(offer)) : null),
      offer.description ? h('p', { class: 'lede', text: offer.description }) : null,
      h('dl', { class: 'facts' },
        h('div', {}, h('dt', { text: 'Provider' }), h('dd', { 'data-field': 'clusterName', text: offer.clusterName || 'unnamed cluster' })),
        h('div', {}, h('dt', { text: 'Cluster ID' }), h('dd', {}, h('code', { 'data-field': 'clusterID', text: offer.clusterID || 'unknown' }))),
        h('div', {}, h('dt', { text: 'Offer ID' }), h('dd', {}, h('code', { text: offer.id }))),
        selfCheckFacts(offer),
        offer.version ? h('div', {}, h('dt', { text: 'Version' }), h('dd', { text: String(offer.version) })) : null,
        offer.updatedAt ? h('div', {}, h('dt', { text: 'Last changed' }), h('dd', { text: formatTime(offer.updatedAt) })) : null),
      selfCheckExplanations(offer),
      h('h2', { text: 'Compare plans' }),
      buyError,
      planTable(offer, planFiltered ? active : null, offer.kind === 'service' ? null : buying),
      // A service is not reserved and bought: it is provisioned with the customer's peering kubeconfig.
      offer.kind === 'service' ? h('p', { class: 'form-actions' },
        h('a', { class: 'button', href: `#/service/${encodeURIComponent(offer.id)}`, 'data-role': 'set-up-service', text: 'Set up this service' }),
        h('span', { class: 'hint', text: ' Pick a plan and its parameters; the provider peers with your cluster and runs the service as the plan’s hosting policy says.' })) : null,
      offer.kind === 'service' ? null : h('p', { class: 'hint' },
        consumerSession() ? 'Reserving holds one unit of a plan for a few minutes while you decide; buying it gives you a contract with the command to peer your cluster with this provider (cluster ID '
          : 'Sign in to reserve and buy a plan. Buying gives you a contract with the command to peer your cluster with this provider (cluster ID ',
        h('code', { text: offer.clusterID || 'unknown' }),
        ').'));
    if (headingHadFocus) body.querySelector('h1')?.focus();
    if (focusedReserve !== undefined) body.querySelector(`[data-reserve="${CSS.escape(focusedReserve)}"]`)?.focus();
  }

  const onChange = () => {
    render();
    refreshCapacity().catch(() => {});
  };
  store.addEventListener('change', onChange);
  render();
  refreshCapacity().catch(() => {});
  scheduleCapacity();
  return () => {
    clearTimeout(capacityTimer);
    store.removeEventListener('change', onChange);
  };
}
