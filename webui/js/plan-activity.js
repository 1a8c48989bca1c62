// Who last changed a plan, and when, as the provider's views say it. The
// catalog stamps every plan a write changes with `updatedAt` and
// `updatedBy` ("provider-agent" when the provider agent wrote it, told
// apart by its User-Agent; "provider" for any other client of the
// provider's token), so "updated by the agent 3 min ago" holds whoever
// opened the page when. The page also remembers the versions it wrote
// itself, to say that the offer's last write came from here.

import { formatTime } from './dom.js';

const ownVersions = new Map(); // offer id -> Set of versions written from this page

/** Remember that this page wrote `version` of `offerId`. */
export function noteOwnWrite(offerId, version) {
  if (!ownVersions.has(offerId)) ownVersions.set(offerId, new Set());
  ownVersions.get(offerId).add(version);
}

/** Was the offer's current version written from this page? */
export function writtenHere(offer) {
  return ownVersions.get(offer.id)?.has(offer.version) ?? false;
}

const WRITERS = { 'provider-agent': 'the agent', provider: 'the provider' };

/** "3 min ago", "2 h ago", "5 days ago", "just now" (for a time `ms` before `now`). */
export function ago(ms, now = Date.now()) {
  const seconds = Math.max(0, Math.round((now - ms) / 1000));
  if (seconds < 45) return 'just now';
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 24) return `${hours} h ago`;
  const days = Math.round(hours / 24);
  return `${days} day${days === 1 ? '' : 's'} ago`;
}

/**
 * What the catalog recorded about a plan's last change (the plan's
 * `updatedAt`/`updatedBy`, normalised as `plan.stamp`), in words:
 * { text: "updated by the agent 3 min ago", title: the full date } or null
 * when the catalog has no stamp (a plan unchanged since before it stamped plans).
 */
export function stampText(stamp, now = Date.now()) {
  const at = Date.parse(stamp?.updatedAt ?? '');
  if (Number.isNaN(at)) return null;
  const who = WRITERS[stamp.updatedBy] ?? (stamp.updatedBy ? `“${stamp.updatedBy}”` : null);
  return { text: `updated ${who ? `by ${who} ` : ''}${ago(at, now)}`, title: formatTime(stamp.updatedAt), by: stamp.updatedBy ?? null };
}
