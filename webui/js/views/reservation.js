// One reservation: the plan it holds, the time left before the unit goes
// back (counting down), and the two ways on: buy it (the contract page
// follows) or release it. Buying names the consumer's Liqo cluster ID
// (required for an offer whose provider peers with Liqo v1: its peering user
// serves one cluster) and may say how long the contract lasts; both are
// checked here, with every problem shown beside its field at once, before
// anything is sent.

import { getReservation, purchase, releaseReservation } from '../api.js';
import { formatTime, h, replaceChildren } from '../dom.js';
import { field } from '../fields.js';
import { formatCost, uiConfig } from '../pricing.js';
import { durationWords, purchaseBody } from '../purchase-terms.js';
import { consumerSessionExpired, requireConsumer } from './sign-in.js';

/** "4:05" from milliseconds (minutes:seconds), "0:00" once past. */
export function countdownText(ms) {
  const total = Math.max(0, Math.ceil(ms / 1000));
  const minutes = Math.floor(total / 60);
  const seconds = String(total % 60).padStart(2, '0');
  return `${minutes}:${seconds}`;
}

export function mountReservation(main, ctx, [id]) {
  const session = requireConsumer(ctx);
  if (!session) return null;
  document.title = 'Reservation · Liqo resource catalog';
  let disposed = false;
  let ticker = null;
  const body = h('div', { class: 'reservation' }, h('p', { class: 'notice', 'aria-busy': 'true', text: 'Loading the reservation…' }));
  const error = h('div', { class: 'notice-slot', role: 'alert' });
  replaceChildren(main,
    h('p', { class: 'back-link' }, h('a', { href: '#/mine' }, h('span', { 'aria-hidden': 'true', text: '← ' }), 'My reservations and purchases')),
    h('div', { class: 'view-header' }, h('h1', { text: 'Reservation' })),
    error, body);

  function fail(err) {
    if (err.status === 401) {
      consumerSessionExpired(ctx);
      return;
    }
    replaceChildren(error, h('p', { class: 'notice notice--error', text: err.status === 410 ? 'This reservation has expired: its unit went back to the plan. Reserve again to buy.' : err.message }));
  }

  function render(r) {
    clearInterval(ticker);
    const offer = ctx.store.get(r.offerID);
    const plan = offer?.plans.find((p) => p.key === r.planID);
    const left = h('span', { class: 'countdown', 'data-field': 'countdown' });
    // Screen readers hear the time left when the page opens and each minute, not every second.
    const spoken = h('span', { class: 'visually-hidden', role: 'timer', 'aria-live': 'polite' });
    const live = r.state === 'reserved';
    const tick = () => {
      const ms = Date.parse(r.expiresAt) - Date.now();
      left.textContent = countdownText(ms);
      const minutes = Math.ceil(Math.max(0, ms) / 60000);
      const words = ms <= 0 ? 'The reservation has expired.' : `${minutes} minute${minutes === 1 ? '' : 's'} left.`;
      if (spoken.textContent !== words) spoken.textContent = words;
      if (ms <= 0) {
        clearInterval(ticker);
        buy.disabled = true;
        release.disabled = true;
        replaceChildren(error, h('p', { class: 'notice notice--warning', 'data-state': 'expired', text: 'Time is up: the unit went back to the plan. Reserve again to buy.' }));
      }
    };
    const longest = Number.isSafeInteger(uiConfig.contractDurationSeconds) ? uiConfig.contractDurationSeconds : null;
    const v1 = Array.isArray(offer?.liqo) && offer.liqo.includes('v1');
    const clusterField = field({
      label: v1 ? 'Your cluster ID' : 'Your cluster ID (optional)',
      hint: v1
        ? 'Required: the Liqo cluster ID of the cluster that will use the resources (liqoctl info shows it). This provider peers with Liqo v1 and makes a peering user for that one cluster.'
        : 'The Liqo cluster ID of the cluster that will use the resources (liqoctl info shows it). You can also report it later.',
      attrs: { name: 'consumerClusterID', autocomplete: 'off', spellcheck: 'false', 'data-field': 'consumer-cluster-id', ...(v1 ? { required: true, 'aria-required': 'true' } : {}) },
    });
    const durationField = field({
      label: 'Contract length (optional)',
      hint: `A number with a unit: s, m, h, d or w, e.g. 30d, 12h or 1h 30m; or a whole number of seconds. Empty: ${longest ? durationWords(longest) : 'the catalog\u2019s longest'}${longest ? ', the longest this catalog allows' : ''}.`,
      attrs: { name: 'duration', autocomplete: 'off', spellcheck: 'false', 'data-field': 'duration' },
    });
    const fields = { consumerClusterID: clusterField, duration: durationField, durationSeconds: durationField };
    const buy = h('button', { type: 'submit', class: 'button', text: 'Buy now' });
    const terms = h('form', {
      class: 'purchase-terms', novalidate: true, 'aria-labelledby': 'purchase-terms-heading',
      onsubmit: async (event) => {
        event.preventDefault();
        error.replaceChildren();
        const checked = purchaseBody({ clusterID: clusterField.control.value, duration: durationField.control.value }, longest, { v1 });
        clusterField.setError(checked.errors?.consumerClusterID ?? '');
        durationField.setError(checked.errors?.duration ?? '');
        if (checked.errors) {
          (checked.errors.consumerClusterID ? clusterField : durationField).control.focus();
          return;
        }
        buy.disabled = true;
        try {
          const contract = await purchase(r.id, session.token, checked.body);
          ctx.purchased = { id: r.id, answer: contract };
          ctx.flash = { kind: 'ok', text: 'Bought. Use the command below to peer with the provider.' };
          ctx.navigate(`#/contract/${encodeURIComponent(r.id)}`);
        } catch (err) {
          buy.disabled = false;
          // A refusal that names one of the fields shows beside it.
          const target = err.status === 400 ? fields[err.field] : null;
          if (target) {
            target.setError(err.message.replace(/^[A-Za-z]+: /, ''));
            target.control.focus();
          } else {
            fail(err);
          }
        }
      },
    },
    h('h2', { id: 'purchase-terms-heading', text: 'Buy' }),
    clusterField.wrapper, durationField.wrapper,
    h('p', { class: 'form-actions' }, buy, h('span', { 'data-slot': 'release' })));
    const release = h('button', {
      type: 'button', class: 'button button--secondary', text: 'Release',
      onclick: async () => {
        release.disabled = true;
        try {
          render(await releaseReservation(r.id, session.token));
          ctx.announce('Reservation released.');
        } catch (err) {
          release.disabled = false;
          fail(err);
        }
      },
    });
    replaceChildren(body,
      h('dl', { class: 'facts' },
        h('div', {}, h('dt', { text: 'Offer' }), h('dd', {}, h('a', { href: `#/offer/${encodeURIComponent(r.offerID)}`, text: offer?.name ?? r.offerID }))),
        h('div', {}, h('dt', { text: 'Plan' }), h('dd', { text: plan?.name || r.planID })),
        h('div', {}, h('dt', { text: 'Cost' }), h('dd', { text: formatCost(r.cost) })),
        h('div', {}, h('dt', { text: 'State' }), h('dd', { 'data-field': 'state', text: r.state })),
        live ? h('div', {}, h('dt', { text: 'Held for' }), h('dd', {}, left, spoken, h('span', { class: 'muted', text: ` (until ${formatTime(r.expiresAt)})` }))) : null),
      live ? terms : null,
      r.state === 'purchased' ? h('p', {}, h('a', { class: 'button', href: `#/contract/${encodeURIComponent(r.id)}`, text: 'Open the contract' })) : null);
    if (live) {
      terms.querySelector('[data-slot="release"]').replaceWith(release);
      tick();
      ticker = setInterval(tick, 1000);
    }
  }

  (async () => {
    try {
      const r = await getReservation(id, session.token);
      if (!disposed) render(r);
    } catch (err) {
      if (!disposed) {
        body.replaceChildren();
        fail(err);
      }
    }
  })();
  return () => {
    disposed = true;
    clearInterval(ticker);
  };
}
