// What a consumer may ask for when buying (the body of
// POST /reservations/{id}/purchase: {consumerClusterID?, durationSeconds?};
// the cluster ID is required, as Liqo v1 spells it, when the provider peers
// with Liqo v1: its peering user serves exactly one consumer cluster),
// checked in the browser with messages in plain words before anything is
// sent. Durations are written in the project's one duration grammar (the
// `edge` crate's, as the catalog's --contract-duration flag reads them):
// numbers with units, combined if wanted ("30d", "12h", "1h 30m", "2w"), or
// a bare whole number of seconds ("3600"). A contract lasts whole seconds.

const UNIT_SECONDS = {
  s: 1, sec: 1, secs: 1, second: 1, seconds: 1,
  m: 60, min: 60, mins: 60, minute: 60, minutes: 60,
  h: 3600, hr: 3600, hrs: 3600, hour: 3600, hours: 3600,
  d: 86400, day: 86400, days: 86400,
  w: 604800, week: 604800, weeks: 604800,
};

/** "30 days", "12 hours", "1 hour 30 minutes": seconds in words. */
export function durationWords(seconds) {
  const parts = [];
  let left = seconds;
  for (const [size, word] of [[86400, 'day'], [3600, 'hour'], [60, 'minute'], [1, 'second']]) {
    const n = Math.floor(left / size);
    left -= n * size;
    if (n > 0) parts.push(`${n} ${word}${n === 1 ? '' : 's'}`);
  }
  return parts.length ? parts.join(' ') : '0 seconds';
}

/**
 * Parse a contract length. Returns { seconds } (null when empty: the
 * catalog's longest), or { error } naming what is wrong. `max` is the
 * longest length in seconds (the catalog's --contract-duration), if known.
 */
export function parseContractDuration(input, max = null) {
  const text = String(input ?? '').trim();
  if (text === '') return { seconds: null };
  let seconds = 0;
  if (/^[0-9]+$/.test(text)) {
    seconds = Number(text);
  } else {
    const part = /([0-9]+(?:\.[0-9]+)?)\s*([a-z]+)\s*/giy;
    let at = 0;
    let match;
    while (at < text.length && (match = part.exec(text)) !== null) {
      const size = UNIT_SECONDS[match[2].toLowerCase()];
      if (size === undefined) {
        return { error: `“${match[2]}” is not a unit: use s, m, h, d or w (e.g. 30d, 12h, 1h 30m), or a number of seconds` };
      }
      seconds += Number(match[1]) * size;
      at = part.lastIndex;
    }
    if (at !== text.length) {
      const hint = text.startsWith('-') ? 'a length is never negative; ' : /^[0-9.]+$/.test(text) ? 'a fraction needs a unit (1.5d); ' : '';
      return { error: `${hint}write a length such as 30d, 12h or 1h 30m, or a whole number of seconds` };
    }
  }
  if (!Number.isSafeInteger(seconds)) {
    return Number.isFinite(seconds)
      ? { error: 'A contract lasts whole seconds: round it (e.g. 1.5h is fine, 1.0001h is not)' }
      : { error: 'Too long' };
  }
  if (seconds < 1) return { error: 'Must be at least 1 second' };
  if (max !== null && seconds > max) return { error: `At most ${durationWords(max)} (the catalog's longest contract)` };
  return { seconds };
}

/** A consumer cluster ID as Liqo writes them: 1–128 of A-Z a-z 0-9 . _ ~ -, not "." or "..". Returns an error or null. */
export function clusterIdProblem(input) {
  const text = String(input ?? '');
  if (text === '') return null;
  if (text.length > 128) return `At most 128 characters (this has ${text.length})`;
  const bad = [...new Set(text.replace(/[A-Za-z0-9._~-]/g, ''))];
  if (bad.length) {
    const shown = bad.map((c) => (c === ' ' ? 'spaces' : `“${c}”`)).join(', ');
    return `Only letters, digits and . _ ~ - may appear (not ${shown}); copy the ID from liqoctl info`;
  }
  if (text === '.' || text === '..') return 'Must not be “.” or “..”';
  return null;
}

/**
 * A consumer cluster ID for a Liqo v1 provider: required, and a DNS-1123
 * label as Liqo v1 requires (liqoctl's cluster-identity check, the
 * ForeignCluster CRD pattern). Returns an error or null.
 */
export function v1ClusterIdProblem(input) {
  const text = String(input ?? '');
  if (text === '') return 'Required: this provider peers with Liqo v1, whose peering user serves exactly one consumer cluster; copy your cluster ID from liqoctl info';
  if (text.length > 63) return `At most 63 characters for Liqo v1 (this has ${text.length})`;
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(text)) return 'Liqo v1 cluster IDs are lower-case letters, digits and hyphens, starting and ending with a letter or digit; copy it from liqoctl info';
  return null;
}

/**
 * The purchase body for the form's two fields, or the errors by field:
 * { body } or { errors: { consumerClusterID?, duration? } }. With `v1` (the
 * provider peers with Liqo v1) the cluster ID is required, as Liqo v1 spells it.
 */
export function purchaseBody({ clusterID, duration }, max = null, { v1 = false } = {}) {
  const errors = {};
  const id = String(clusterID ?? '').trim();
  const idProblem = v1 ? v1ClusterIdProblem(id) : clusterIdProblem(id);
  if (idProblem) errors.consumerClusterID = idProblem;
  const length = parseContractDuration(duration, max);
  if (length.error) errors.duration = length.error;
  if (Object.keys(errors).length) return { errors };
  const body = {};
  if (id) body.consumerClusterID = id;
  if (length.seconds !== null) body.durationSeconds = length.seconds;
  return { body };
}
