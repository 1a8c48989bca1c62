// The words for a level a provider's self-check reports (an offer's
// `enforcement`, its `isolation`): enforcement.js and isolation.js each give one
// per level, self-checks.js lists them for the views.

/**
 * `levels` maps each level the catalog sends to `{ label, tone, explain }` (a
 * short label, a tone for its badge, what it means for a buyer); anything else
 * (absent, or a name this UI does not know) gets `notReported`, never a level.
 */
export function levelWords(levels, notReported) {
  return (level) => (Object.hasOwn(levels, level) ? levels[level] : notReported);
}
