// A list of steps with their state (done, in progress, failed, to come),
// the one in progress marked for assistive technology and followed by what
// the system last said about it: the contract page's automatic peering and
// the service page's provisioning and binding.

import { h, srOnly } from '../dom.js';

const STATUS_TEXT = { done: 'done', current: 'in progress', failed: 'failed', todo: 'to come' };

/** `steps`: [{key, label, status}]; `words` shown beside the step in progress (or failed); `role` the list's data-role. */
export function stepItems(steps, words, role) {
  return h('ol', { class: 'steps', 'data-role': role },
    steps.map((step) => h('li', {
      class: `step step--${step.status}`,
      'data-step': step.key,
      'data-status': step.status,
      'aria-current': step.status === 'current' ? 'step' : null,
    }, step.label, srOnly(` (${STATUS_TEXT[step.status]})`),
    (step.status === 'current' || step.status === 'failed') && words
      ? h('span', { class: 'muted', 'data-role': 'step-words', text: ` — ${words}` }) : null)));
}
