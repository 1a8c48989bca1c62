// The offers the page knows, keyed by id, fed by the live feed (snapshots
// replace everything, upserts and deletes patch) and by the REST answers to
// the provider's own writes. Every change is announced as one "change" event
// carrying what was added, updated and removed, so views patch the DOM
// instead of rebuilding it and can tell users what changed.

import { normalizeOffer } from './model.js';

export class OfferStore extends EventTarget {
  constructor() {
    super();
    this.offers = new Map();
    /** True once a full list (feed snapshot or REST list) has been applied. */
    this.loaded = false;
    /** Where the current full list came from: "feed" or "rest". */
    this.source = null;
    this.loadedAt = null;
    /** Goes up by one with every announced change (views key cached orders on it). */
    this.generation = 0;
    this.warming = null;
  }

  get(id) {
    return this.offers.get(id) ?? null;
  }

  all() {
    return [...this.offers.values()];
  }

  /** Replace every offer with `list` (a feed snapshot or a REST list). */
  replaceAll(list, source) {
    const next = new Map();
    for (const raw of Array.isArray(list) ? list : []) {
      const offer = normalizeOffer(raw);
      if (offer) next.set(offer.id, offer);
    }
    const added = [];
    const updated = [];
    const removed = [];
    for (const [id, offer] of next) {
      const before = this.offers.get(id);
      if (!before) added.push(offer);
      else if (changed(before, offer)) updated.push(offer);
      else next.set(id, before); // keep the same object: views key cached DOM on it
    }
    for (const [id, offer] of this.offers) if (!next.has(id)) removed.push(offer);
    const initial = !this.loaded;
    this.offers = next;
    this.loaded = true;
    this.source = source;
    this.loadedAt = Date.now();
    this.#emit({ added, updated, removed, initial, source });
    this.#warmUp();
  }

  /** Replace the offers matching `predicate` (e.g. one provider's) with `list`, leaving the others. */
  replaceWhere(predicate, list, source) {
    const incoming = new Map();
    for (const raw of Array.isArray(list) ? list : []) {
      const offer = normalizeOffer(raw);
      if (offer) incoming.set(offer.id, offer);
    }
    const removed = [];
    for (const [id, offer] of this.offers) {
      if (predicate(offer) && !incoming.has(id)) {
        this.offers.delete(id);
        removed.push(offer);
      }
    }
    const added = [];
    const updated = [];
    for (const offer of incoming.values()) this.#put(offer, added, updated);
    this.#emit({ added, updated, removed, initial: false, source });
  }

  /** Add or replace one offer; an older version than the one held is ignored. */
  upsert(raw, source) {
    const offer = normalizeOffer(raw);
    if (!offer) return;
    const added = [];
    const updated = [];
    this.#put(offer, added, updated);
    this.#emit({ added, updated, removed: [], initial: false, source });
  }

  /** Remove one offer by id. */
  remove(id, source) {
    const before = this.offers.get(id);
    if (!before) return;
    this.offers.delete(id);
    this.#emit({ added: [], updated: [], removed: [before], initial: false, source });
  }

  #put(offer, added, updated) {
    const before = this.offers.get(offer.id);
    if (!before) {
      this.offers.set(offer.id, offer);
      added.push(offer);
    } else if (offer.version >= before.version && changed(before, offer)) {
      this.offers.set(offer.id, offer);
      updated.push(offer);
    }
  }

  #emit(detail) {
    if (!detail.initial && detail.added.length + detail.updated.length + detail.removed.length === 0) return;
    this.generation += 1;
    this.dispatchEvent(new CustomEvent('change', { detail }));
  }

  /**
   * Parse the plans of every offer not parsed yet, a slice at a time while
   * the page is idle: the first page shows before this, and the first
   * quantity filter finds the work done.
   */
  #warmUp() {
    if (this.warming !== null) return;
    const idle = typeof requestIdleCallback === 'function'
      ? (fn) => requestIdleCallback(fn, { timeout: 1000 })
      : (fn) => setTimeout(() => fn({ timeRemaining: () => 8 }), 0);
    const pending = [...this.offers.values()].filter((o) => o.parsed === false);
    let at = 0;
    const step = (deadline) => {
      // At least one slice per call; a bigger one when the page was never idle for a second.
      const slice = deadline.didTimeout ? 1000 : 100;
      do {
        for (const end = Math.min(at + slice, pending.length); at < end; at += 1) void pending[at].plans;
      } while (at < pending.length && deadline.timeRemaining() > 1);
      if (at < pending.length) idle(step);
      else this.warming = null;
    };
    this.warming = idle(step);
  }
}

function changed(before, after) {
  if (before.version !== after.version) return true;
  // Same version number but different content (e.g. a catalog without versions): compare the wire form.
  return JSON.stringify(before.raw) !== JSON.stringify(after.raw);
}
