// The provider's tenant isolation (an offer's `isolation`, which its isolation
// controller checks and reports to the catalog: a NetworkPolicy per buyer, and a
// probe that tries the traffic they deny), put in a buyer's words: whether other
// buyers on the same provider can reach your pods.

import { levelWords } from './levels.js';

/** Each level the catalog sends: a short label, a tone for its badge, and what it means for a buyer. */
const LEVELS = {
  enforced: {
    label: 'Isolated (checked)',
    tone: 'ok',
    explain: 'Other buyers on this provider cannot reach your pods: each buyer\'s pods are fenced off by network policies, and the provider\'s probe checked that its network enforces them.',
  },
  unverified: {
    label: 'Isolation unverified',
    tone: 'warn',
    explain: 'The provider fences each buyer\'s pods off with network policies, but its probe has not proven that its network enforces them: other buyers may be able to reach your pods.',
  },
  failed: {
    label: 'Isolation failing',
    tone: 'danger',
    explain: 'The provider\'s probe saw traffic its network policies deny get through: other buyers on this provider can reach your pods.',
  },
  off: {
    label: 'Not isolated',
    tone: 'danger',
    explain: 'The provider has turned tenant isolation off: nothing keeps other buyers on this provider from reaching your pods.',
  },
};

const NOT_REPORTED = {
  label: 'Isolation not reported',
  tone: 'neutral',
  explain: 'This provider has not reported whether it keeps its buyers\' pods apart from each other.',
};

/** What `level` (the offer's `isolation`, possibly absent) means for a buyer: `{ label, tone, explain }`. */
export const isolationOf = levelWords(LEVELS, NOT_REPORTED);
