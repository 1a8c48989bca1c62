// The provider's session: the catalog's JWT and who it names, kept in
// sessionStorage only, so it dies with the tab and is never shared with
// other tabs or written to disk by the page. While the page stays open the
// peering credentials of the sign-in are held in memory (never stored) and
// the token is renewed with them before it expires.

import { authenticate } from './api.js';

const KEY = 'catalog.provider-session';
/** Renew when this share of the token's lifetime is left (and at least a minute before). */
const RENEW_AT_REMAINING = 0.2;

let credentials = null;
let renewTimer = null;

function expiryMs(expiresAt) {
  if (expiresAt === undefined || expiresAt === null || expiresAt === '') return null;
  if (typeof expiresAt === 'number') return expiresAt < 1e12 ? expiresAt * 1000 : expiresAt;
  const ms = Date.parse(expiresAt);
  return Number.isNaN(ms) ? null : ms;
}

/** A session kept under `key` in sessionStorage ({ token, expiresAt, … }), dropped once expired; null if none. */
export function storedSession(key) {
  let session;
  try {
    session = JSON.parse(sessionStorage.getItem(key) ?? 'null');
  } catch {
    session = null;
  }
  if (!session || typeof session.token !== 'string') return null;
  const expires = expiryMs(session.expiresAt);
  if (expires !== null && expires <= Date.now()) {
    sessionStorage.removeItem(key);
    return null;
  }
  return session;
}

/** The current session, or null when signed out or expired. */
export function currentSession() {
  const session = storedSession(KEY);
  // Expired (or gone): nothing left to renew.
  if (!session && (credentials || renewTimer)) clearSession();
  return session;
}

/** Remember a successful sign-in: { token, expiresAt, clusterID, clusterName }. */
export function saveSession(session) {
  sessionStorage.setItem(KEY, JSON.stringify(session));
  scheduleRenewal(session);
}

/**
 * Keep the peering credentials of this sign-in in memory so the token can be
 * renewed before it expires (a reload forgets them: the next expiry then
 * asks to sign in again, and the editor keeps its draft).
 */
export function keepCredentialsForRenewal(values) {
  credentials = { ...values };
}

function scheduleRenewal(session) {
  clearTimeout(renewTimer);
  renewTimer = null;
  const expires = expiryMs(session.expiresAt);
  if (!credentials || expires === null) return;
  const issued = Date.now();
  const lifetime = Math.max(0, expires - issued);
  const wait = Math.max(1000, Math.min(lifetime * (1 - RENEW_AT_REMAINING), lifetime - 60000));
  renewTimer = setTimeout(renew, wait);
}

async function renew() {
  const creds = credentials;
  if (!creds || !currentSession()) return;
  try {
    const answer = await authenticate(creds);
    saveSession({ ...currentSession(), token: answer.token, expiresAt: answer.expiresAt ?? null });
    window.dispatchEvent(new CustomEvent('catalog-session-renewed'));
  } catch {
    // Refused (credentials rotated elsewhere) or unreachable: the next write
    // gets a 401 and the editor keeps its draft while the provider signs in.
    renewTimer = setTimeout(renew, 30000);
  }
}

export function clearSession() {
  clearTimeout(renewTimer);
  renewTimer = null;
  credentials = null;
  sessionStorage.removeItem(KEY);
}
