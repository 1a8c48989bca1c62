// What the provider view says about who changed a plan and when. The
// catalog keeps one `updatedAt` per offer and no author, so the page tells
// apart what it can see: the versions this page wrote itself (held in
// memory), and, from the live feed, when each plan's resources last changed
// while the page was open — the provider agent's updates, which change
// exactly those.

const ownVersions = new Map(); // offer id -> Set of versions written from this page
const planChanges = new Map(); // offer id -> Map(plan key -> time its resources changed)
const lastResources = new Map(); // offer id -> Map(plan key -> resources as JSON)

/** Remember that this page wrote `version` of `offerId`. */
export function noteOwnWrite(offerId, version) {
  if (!ownVersions.has(offerId)) ownVersions.set(offerId, new Set());
  ownVersions.get(offerId).add(version);
}

/** Was the offer's current version written from this page? */
export function writtenHere(offer) {
  return ownVersions.get(offer.id)?.has(offer.version) ?? false;
}

/** When a plan's resources last changed while this page watched (ms), or null. */
export function planChangedAt(offerId, planKey) {
  return planChanges.get(offerId)?.get(planKey) ?? null;
}

function snapshot(offer) {
  return new Map(offer.plans.map((p) => [p.key, JSON.stringify(p.resources.map((r) => [r.name, r.value]))]));
}

/** Follow the store: note each plan whose resources an update changed. */
export function trackPlanChanges(store) {
  for (const offer of store.all()) lastResources.set(offer.id, snapshot(offer));
  store.addEventListener('change', (event) => {
    const { added, updated, removed, initial } = event.detail;
    const now = Date.now();
    for (const offer of [...added, ...updated]) {
      const before = lastResources.get(offer.id);
      const after = snapshot(offer);
      if (before && !initial) {
        for (const [key, resources] of after) {
          if (before.get(key) !== resources) {
            if (!planChanges.has(offer.id)) planChanges.set(offer.id, new Map());
            planChanges.get(offer.id).set(key, now);
          }
        }
      }
      lastResources.set(offer.id, after);
    }
    for (const offer of removed) lastResources.delete(offer.id);
  });
}
