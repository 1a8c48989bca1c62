// The provider's Liqo enforcement level (an offer's `enforcement`, which its
// ResourceSlice class controller reads from Liqo's settings and reports to
// the catalog), put in a buyer's words: how firmly what you buy is yours
// (shown with the other self-checks: self-checks.js).

import { levelWords } from './levels.js';

/** Each level the catalog sends: a short label, a tone for its badge, and what it means for a buyer. */
const LEVELS = {
  hard: {
    label: 'Enforced (hard)',
    tone: 'ok',
    explain: 'Liqo holds every consumer to what it bought, and each pod\'s limits must equal its requests: no one, you included, can use more than was sold at run time.',
  },
  soft: {
    label: 'Enforced (soft)',
    tone: 'ok',
    explain: 'Liqo counts every pod\'s requests against what its consumer bought and refuses pods beyond it; pods may still use more than they request while the cluster has room.',
  },
  none: {
    label: 'Enforced (requests only)',
    tone: 'warn',
    explain: 'Liqo refuses pods whose requests go beyond what their consumer bought, but pods that declare no requests are not counted: a consumer can use more than it bought.',
  },
  off: {
    label: 'Not enforced',
    tone: 'danger',
    explain: 'Liqo on this provider does not check pods against what their consumers bought: other consumers may use capacity you paid for.',
  },
  unknown: {
    label: 'Enforcement unknown',
    tone: 'warn',
    explain: 'The provider cannot read its own Liqo settings, so how firmly what you buy is held for you is not known.',
  },
};

const NOT_REPORTED = {
  label: 'Enforcement not reported',
  tone: 'neutral',
  explain: 'This provider has not reported how strictly Liqo enforces what it sells.',
};

/** What `level` (the offer's `enforcement`, possibly absent) means for a buyer: `{ label, tone, explain }`. */
export const enforcementOf = levelWords(LEVELS, NOT_REPORTED);
