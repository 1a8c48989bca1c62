// What a provider's self-checks report, as each offer carries it: how firmly
// Liqo holds every buyer to what it bought (enforcement.js) and whether other
// buyers on the provider can reach your pods (isolation.js).

import { enforcementOf } from './enforcement.js';
import { isolationOf } from './isolation.js';

/** In the order they are shown: the offer's field, its title among the offer's facts, the words for its levels. */
export const SELF_CHECKS = [
  { field: 'enforcement', title: 'Liqo enforcement', of: enforcementOf },
  { field: 'isolation', title: 'Tenant isolation', of: isolationOf },
];
