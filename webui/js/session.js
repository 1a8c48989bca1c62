// The provider's session: the catalog's JWT and who it names, kept in
// sessionStorage only, so it dies with the tab and is never shared with
// other tabs or written to disk by the page.

const KEY = 'catalog.provider-session';

function expiryMs(expiresAt) {
  if (expiresAt === undefined || expiresAt === null || expiresAt === '') return null;
  if (typeof expiresAt === 'number') return expiresAt < 1e12 ? expiresAt * 1000 : expiresAt;
  const ms = Date.parse(expiresAt);
  return Number.isNaN(ms) ? null : ms;
}

/** The current session, or null when signed out or expired. */
export function currentSession() {
  let session;
  try {
    session = JSON.parse(sessionStorage.getItem(KEY) ?? 'null');
  } catch {
    session = null;
  }
  if (!session || typeof session.token !== 'string') return null;
  const expires = expiryMs(session.expiresAt);
  if (expires !== null && expires <= Date.now()) {
    clearSession();
    return null;
  }
  return session;
}

/** Remember a successful sign-in: { token, expiresAt, clusterID, clusterName }. */
export function saveSession(session) {
  sessionStorage.setItem(KEY, JSON.stringify(session));
}

export function clearSession() {
  sessionStorage.removeItem(KEY);
}
