// One contract (what a purchase yields): its state as the consumer's
// cluster reports it — with purchase-controller peering by itself, step by
// step (contract-steps.js) — when it ends, what it grants, and, as the
// fallback while no controller has reported (or one that does not peer by
// itself asks for it), how to peer by hand: the exact liqoctl command for Liqo v0.x (out-of-band peering with the
// provider's auth URL, cluster ID and token) and, for Liqo v1, the
// peering-user kubeconfig to download with the `liqoctl peer` command that
// uses it, or — while the provider has not yet attached the peering user
// it makes for this contract's cluster — that it is waiting. Commands have a
// copy button. A service instance's contract (issue 32) points to the
// service instance's page instead: there the provider peers with the
// consumer, not the other way round.

import { cancelPurchase, getContract, listServiceInstances } from '../api.js';
import { formatTime, h, replaceChildren } from '../dom.js';
import { peeringSteps } from '../contract-steps.js';
import { formatPricedCost } from '../pricing.js';
import { consumerSessionExpired, requireConsumer } from './sign-in.js';
import { shellWord } from '../shell.js';
import { stepItems } from './steps.js';
import { copyBlock } from './copy-block.js';

const STATE_TEXT = {
  pending: 'Pending: waiting for your cluster to peer',
  peered: 'Peered: your cluster reached the provider',
  granted: 'Granted: the provider granted the resources',
  ready: 'Ready: the virtual node is up',
  failed: 'Failed',
};

// Where a Liqo v1 contract's own peering credentials stand (`peeringState`).
const PEERING_TEXT = {
  awaitingCredentials: 'Waiting for the provider',
  credentialsReady: 'Ready',
};


/** liqoctl v0.10 out-of-band peering. */
export function liqoctlV0(v0) {
  return `liqoctl peer out-of-band ${shellWord(v0.clusterName)} --auth-url ${shellWord(v0.authURL)} --cluster-id ${shellWord(v0.clusterID)} --auth-token ${shellWord(v0.token)}`;
}

/** liqoctl v1.2 peering with the downloaded peering-user kubeconfig, asking for what the contract grants. */
export function liqoctlV1(file, contract) {
  const words = ['liqoctl', 'peer', '--remote-kubeconfig', shellWord(file)];
  if (contract.resourceSliceClass) words.push('--resource-slice-class', shellWord(contract.resourceSliceClass));
  const resources = contract.resources ?? {};
  for (const [name, value] of Object.entries(resources)) {
    if (name === 'cpu') words.push('--cpu', shellWord(value));
    else if (name === 'memory') words.push('--memory', shellWord(value));
    else if (name === 'pods') words.push('--pods', shellWord(value));
    else words.push('--resource', shellWord(`${name}=${value}`));
  }
  return words.join(' ');
}

// The automatic peering's steps, the one in progress with what the
// controller last said.
function stepList(progress) {
  return h('section', { class: 'peering-steps', 'aria-labelledby': 'peering-steps' },
    h('h2', { id: 'peering-steps', text: 'Peering, step by step' }),
    stepItems(progress.steps, progress.words, 'peering-steps'));
}

function timeLeft(iso) {
  const ms = Date.parse(iso) - Date.now();
  if (Number.isNaN(ms)) return '';
  if (ms <= 0) return 'ended';
  const days = Math.floor(ms / 86400000);
  const hours = Math.floor((ms % 86400000) / 3600000);
  const minutes = Math.floor((ms % 3600000) / 60000);
  if (days > 0) return `${days} day${days === 1 ? '' : 's'} ${hours} h left`;
  if (hours > 0) return `${hours} h ${minutes} min left`;
  return `${Math.max(1, minutes)} min left`;
}

export function mountContract(main, ctx, [id]) {
  const session = requireConsumer(ctx, 'Sign in to see your contract.');
  if (!session) return null;
  document.title = 'Contract · Liqo resource catalog';
  let disposed = false;
  const flash = ctx.flash;
  ctx.flash = null;
  const body = h('div', { class: 'contract' }, h('p', { class: 'notice', 'aria-busy': 'true', text: 'Loading the contract…' }));
  const error = h('div', { class: 'notice-slot', role: 'alert' });
  replaceChildren(main,
    h('p', { class: 'back-link' }, h('a', { href: '#/mine' }, h('span', { 'aria-hidden': 'true', text: '← ' }), 'My reservations and purchases')),
    h('div', { class: 'view-header' }, h('h1', { text: 'Contract' })),
    flash ? h('p', { class: 'notice notice--ok', role: 'status', 'data-flash': flash.kind, text: flash.text }) : null,
    error, body);

  function render(c) {
    const offer = ctx.store.get(c.offerID);
    const plan = offer?.plans.find((p) => p.key === c.planID);
    // An older catalog's purchase: v0 credentials as `peering`, no contract state.
    const v0 = c.credentials?.v0 ?? (c.legacy ? c.peering : null);
    const v1 = c.credentials?.v1 ?? null;
    const active = c.legacy ? c.state === 'purchased' : c.active !== false;
    const providerName = c.clusterName || v0?.clusterName || offer?.clusterName || c.clusterID;
    const resources = c.resources ?? Object.fromEntries((plan?.resources ?? []).map((r) => [r.name, r.value]));
    // A service instance's contract: the provider peers with the consumer, not the other way round,
    // so the page points to the service's own page instead of peering steps and commands.
    const service = offer?.kind === 'service';
    const stateText = c.legacy ? (active ? 'Bought' : 'Cancelled') : (active ? (service ? 'Active: a service instance' : STATE_TEXT[c.state] ?? c.state) : `Ended (${c.ended ?? 'ended'})`);
    const progress = c.legacy ? null : peeringSteps(c);
    const reasonText = progress ? progress.words : c.reason;
    // The manual command is the fallback: shown while no controller has
    // reported, or when the one reporting does not peer by itself.
    const manual = !service && (!progress || progress.fallback);
    const peering = [];
    if (active && service) {
      // Which instance this contract is: the catalog's list says (contractID).
      const link = h('span', { 'aria-busy': 'true', text: 'Finding its instance…' });
      peering.push(h('p', { class: 'notice', 'data-role': 'service-contract' }, 'This contract is a service instance: its provider peers with your cluster and runs the service. ', link, '.'));
      listServiceInstances(session.token).catch(() => []).then((all) => {
        if (disposed) return;
        const instance = all.find((r) => r.contractID === (c.id ?? id));
        link.replaceWith(instance
          ? h('a', { href: `#/service-instance/${encodeURIComponent(instance.id)}`, text: 'Follow it, bind it or deprovision it on its page' })
          : h('a', { href: `#/service/${encodeURIComponent(c.offerID)}`, text: 'See the service' }));
      });
    }
    if (active && progress && !service) peering.push(stepList(progress));
    if (active && progress && manual) {
      peering.push(h('p', { class: 'notice', 'data-role': 'manual-fallback', text: progress.reported
        ? 'Your cluster’s purchase-controller does not peer by itself (it runs without --auto-peer): peer by hand as below.'
        : 'No controller has reported on this contract yet. With purchase-controller --auto-peer your cluster peers by itself and this page follows it; without it, peer by hand as below.' }));
    }
    if (active && manual && v0) {
      peering.push(h('section', { class: 'peering', 'aria-labelledby': 'peer-v0', 'data-liqo': 'v0' },
        h('h2', { id: 'peer-v0', text: 'Peer with Liqo v0.x' }),
        h('p', { text: 'Run this on your (consumer) cluster, with liqoctl of the Liqo version the provider runs:' }),
        copyBlock('Command for Liqo v0.x', liqoctlV0(v0), 'liqoctl-v0')));
    }
    if (active && manual && v1?.kubeconfig) {
      const file = `${String(providerName).replace(/[^A-Za-z0-9._-]+/g, '-')}-peering-user.kubeconfig`;
      const url = URL.createObjectURL(new Blob([v1.kubeconfig], { type: 'application/yaml' }));
      peering.push(h('section', { class: 'peering', 'aria-labelledby': 'peer-v1', 'data-liqo': 'v1' },
        h('h2', { id: 'peer-v1', text: 'Peer with Liqo v1' }),
        h('p', {}, '1. Download the provider’s peering-user kubeconfig and keep it private: ',
          h('a', { class: 'button button--secondary button--small', href: url, download: file, 'data-role': 'kubeconfig' }, `Download ${file}`)),
        h('p', { text: '2. Run this on your (consumer) cluster, in the folder you saved it to:' }),
        copyBlock('Command for Liqo v1', liqoctlV1(file, c), 'liqoctl-v1')));
    }
    // Liqo v1: the provider attaches a peering user made for this contract's cluster.
    const awaiting = c.peeringState?.state === 'awaitingCredentials';
    if (active && manual && awaiting && !v0) {
      peering.push(h('p', { class: 'notice', 'data-role': 'awaiting-credentials', text: 'The provider is making a peering user for your cluster. This page shows how to peer once it is attached; come back in a moment.' }));
    } else if (active && manual && !v0 && !v1?.kubeconfig) {
      peering.push(h('p', { class: 'notice notice--warning', text: 'The provider’s peering credentials are not available right now. Try again later or ask the provider.' }));
    }
    const cancel = h('button', {
      type: 'button', class: 'button button--danger', text: 'Cancel this contract',
      onclick: async () => {
        // eslint-disable-next-line no-alert
        if (!window.confirm('Cancel this contract? The provider stops granting its resources, and the unit goes back to the plan.')) return;
        cancel.disabled = true;
        try {
          await cancelPurchase(c.id ?? id, session.token);
          render(await getContract(id, session.token));
          ctx.announce('Contract cancelled.');
        } catch (err) {
          cancel.disabled = false;
          if (err.status === 401) consumerSessionExpired(ctx);
          else replaceChildren(error, h('p', { class: 'notice notice--error', text: err.message }));
        }
      },
    });
    replaceChildren(body,
      h('dl', { class: 'facts' },
        h('div', {}, h('dt', { text: 'State' }), h('dd', { 'data-field': 'contract-state' }, stateText, reasonText ? h('span', { class: 'muted', text: ` — ${reasonText}` }) : null)),
        h('div', {}, h('dt', { text: 'Provider' }), h('dd', { text: providerName })),
        h('div', {}, h('dt', { text: 'Offer and plan' }), h('dd', {}, h('a', { href: `#/offer/${encodeURIComponent(c.offerID)}`, text: offer?.name ?? c.offerID }), ` · ${plan?.name || c.planID}`)),
        h('div', {}, h('dt', { text: 'Resources' }), h('dd', { text: Object.entries(resources).map(([k, v]) => `${k} ${v}`).join(', ') || '—' })),
        h('div', {}, h('dt', { text: 'Cost' }), h('dd', { 'data-field': 'cost', text: formatPricedCost(c.cost, c.pricing) })),
        c.boughtBy ? h('div', {}, h('dt', { text: 'Bought by' }), h('dd', { 'data-field': 'bought-by', text: c.boughtBy })) : null,
        c.purchasedAt ? h('div', {}, h('dt', { text: 'Bought' }), h('dd', { text: formatTime(c.purchasedAt) })) : null,
        c.expiresAt && !c.legacy ? h('div', {}, h('dt', { text: 'Expires' }), h('dd', { 'data-field': 'expires' }, formatTime(c.expiresAt), active ? h('span', { class: 'muted', text: ` (${timeLeft(c.expiresAt)})` }) : null)) : null,
        c.consumerClusterID ? h('div', {}, h('dt', { text: 'Your cluster ID' }), h('dd', {}, h('code', { text: c.consumerClusterID }))) : null,
        c.peeringState ? h('div', {}, h('dt', { text: 'Peering credentials' }), h('dd', { 'data-field': 'peering-state' }, PEERING_TEXT[c.peeringState.state] ?? c.peeringState.state, h('span', { class: 'muted', text: ` — ${c.peeringState.reason}` }))) : null,
        c.endingSoon && active ? h('div', {}, h('dt', { text: 'Ending soon' }), h('dd', { 'data-field': 'ending-soon', text: 'This contract ends soon; your controller can extend it (POST /contracts/{id}/extend).' })) : null,
        c.liqo ? h('div', {}, h('dt', { text: 'Liqo' }), h('dd', { text: c.liqo.join(', ') })) : null),
      peering,
      active && !service ? h('p', { class: 'form-actions' }, cancel) : null);
  }

  (async () => {
    try {
      const c = await getContract(id, session.token);
      if (!disposed) render(c);
    } catch (err) {
      if (disposed) return;
      body.replaceChildren();
      if (err.status === 401) consumerSessionExpired(ctx);
      else replaceChildren(error, h('p', { class: 'notice notice--error', text: err.status === 404 ? `You have no contract with the ID ${id}.` : err.message }));
    }
  })();
  return () => {
    disposed = true;
  };
}
