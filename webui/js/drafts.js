// Unsaved offer edits, kept in sessionStorage (this tab only) while the
// editor is open, so an expired session, a reload or a mistaken navigation
// does not lose them. A draft is keyed by the offer it edits ("new" for a
// new offer) and removed when saved or discarded.

const PREFIX = 'catalog.draft.';

/** The draft of `key` ("new" or an offer id): { form, baseVersion, savedAt } or null. */
export function loadDraft(key) {
  try {
    const draft = JSON.parse(sessionStorage.getItem(PREFIX + key) ?? 'null');
    return draft && typeof draft === 'object' && draft.form ? draft : null;
  } catch {
    return null;
  }
}

export function saveDraft(key, form, baseVersion) {
  try {
    sessionStorage.setItem(PREFIX + key, JSON.stringify({ form, baseVersion, savedAt: Date.now() }));
  } catch {
    // Storage full or disabled: the guard against leaving still protects the edits.
  }
}

export function discardDraft(key) {
  sessionStorage.removeItem(PREFIX + key);
}
