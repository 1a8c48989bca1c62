// Service offers (issue 32): a badge saying an offer sells a running
// service, and where its plans may run (their hosting policies).
import { h, srOnly } from './dom.js';

/** The hosting policies of an offer's plans, each once, in plan order. */
export function hostingPolicies(offer) {
  return [...new Set(offer.plans.map((plan) => plan.hosting).filter(Boolean))];
}

/** "Service · Local, Remote" for a service offer; null for capacity. */
export function serviceBadge(offer) {
  if (offer.kind !== 'service') return null;
  const hosting = hostingPolicies(offer);
  return h('span', { class: 'badge badge--type', 'data-field': 'kind' },
    srOnly('Sells: '), 'Service',
    hosting.length ? ` · ${hosting.join(', ')}` : '');
}
