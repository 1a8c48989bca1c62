// The consumer's session: a bearer token the catalog accepts with the
// consumer role, kept in sessionStorage only (this tab). It comes from the
// configured OpenID Connect issuer (authorization-code flow with PKCE, a
// public client: the browser holds no secret) or, where no issuer is
// configured, is a consumer token the catalog's administrator issued
// (`POST /consumer-tokens`; `catalog --demo` prints one).

import { storedSession } from './session.js';

const KEY = 'catalog.consumer-session';
const PENDING = 'catalog.oidc-pending';

/** The claims of a JWT, unverified (the catalog verifies; the page only reads who and until when). */
export function jwtClaims(token) {
  const part = String(token).split('.')[1];
  if (!part) return null;
  try {
    const json = atob(part.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(part.length / 4) * 4, '='));
    const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(json, (c) => c.charCodeAt(0))));
    return claims && typeof claims === 'object' ? claims : null;
  } catch {
    return null;
  }
}

/** The signed-in consumer ({ token, subject, name, expiresAt, via }) or null. */
export function consumerSession() {
  return storedSession(KEY);
}

/**
 * Start a session from a token. Returns the session, or throws an Error
 * saying why the token cannot be one (not a JWT, expired).
 */
export function startConsumerSession(token, via) {
  const claims = jwtClaims(token);
  if (!claims || typeof claims.sub !== 'string') throw new Error('This is not a token the catalog issues: paste the whole token, three parts separated by dots.');
  const expiresAt = typeof claims.exp === 'number' ? claims.exp * 1000 : null;
  if (expiresAt !== null && expiresAt <= Date.now()) throw new Error('This token has expired. Ask for a new one.');
  const session = { token, subject: claims.sub, name: claims.name || claims.preferred_username || claims.sub, expiresAt, via };
  sessionStorage.setItem(KEY, JSON.stringify(session));
  window.dispatchEvent(new CustomEvent('consumer-session'));
  return session;
}

export function endConsumerSession() {
  sessionStorage.removeItem(KEY);
  window.dispatchEvent(new CustomEvent('consumer-session'));
}

// --- OpenID Connect: authorization code with PKCE (RFC 7636) ----------------

function base64url(bytes) {
  let text = '';
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function randomText(bytes = 32) {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

async function discovery(issuer) {
  // OpenID Connect Discovery 1.0 §4: the issuer without a trailing slash, then the well-known path.
  const response = await fetch(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`, { headers: { Accept: 'application/json' } });
  if (!response.ok) throw new Error(`the issuer's discovery document answered ${response.status}`);
  const doc = await response.json();
  if (doc.issuer !== issuer) throw new Error(`the discovery document names another issuer (${doc.issuer})`);
  if (!doc.authorization_endpoint || !doc.token_endpoint) throw new Error('the issuer publishes no authorization or token endpoint');
  return doc;
}

/** The address the issuer sends the browser back to (register it at the issuer). */
export function redirectUri() {
  return `${location.origin}/`;
}

/** Go to the issuer's sign-in page; `returnTo` is the view to come back to. */
export async function startOidcSignIn({ issuer, clientID }, returnTo) {
  const doc = await discovery(issuer);
  const verifier = randomText(48);
  const challenge = base64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
  const state = randomText(16);
  sessionStorage.setItem(PENDING, JSON.stringify({ verifier, state, returnTo, issuer, clientID, tokenEndpoint: doc.token_endpoint }));
  const url = new URL(doc.authorization_endpoint);
  url.search = new URLSearchParams({
    response_type: 'code', client_id: clientID, redirect_uri: redirectUri(), scope: 'openid profile',
    state, code_challenge: challenge, code_challenge_method: 'S256',
  }).toString();
  location.assign(url.toString());
}

/**
 * Back from the issuer (`?code=…&state=…` or `?error=…`): exchange the code
 * for tokens and start the session. Returns null when this page load is not
 * a return from the issuer, else { returnTo, error? }.
 */
export async function finishOidcSignIn() {
  const params = new URLSearchParams(location.search);
  if (!params.has('state') || !(params.has('code') || params.has('error'))) return null;
  // Drop the code from the address at once (history, bookmarks, screenshots).
  history.replaceState(null, '', `${location.pathname}${location.hash}`);
  let pending;
  try {
    pending = JSON.parse(sessionStorage.getItem(PENDING) ?? 'null');
  } catch {
    pending = null;
  }
  sessionStorage.removeItem(PENDING);
  if (!pending || pending.state !== params.get('state')) {
    return { returnTo: '#/sign-in', error: 'The sign-in answer does not belong to a sign-in started in this tab. Start again.' };
  }
  if (params.has('error')) {
    return { returnTo: '#/sign-in', error: `The issuer refused the sign-in: ${params.get('error_description') || params.get('error')}.` };
  }
  try {
    const response = await fetch(pending.tokenEndpoint, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
      body: new URLSearchParams({
        grant_type: 'authorization_code', code: params.get('code'), redirect_uri: redirectUri(),
        client_id: pending.clientID, code_verifier: pending.verifier,
      }),
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(answer.error_description || answer.error || `the token endpoint answered ${response.status}`);
    // The catalog accepts the issuer's JWTs for its audience: the access token when it is one, else the ID token.
    const token = jwtClaims(answer.access_token ?? '') ? answer.access_token : answer.id_token;
    if (!token) throw new Error('the issuer sent no token');
    startConsumerSession(token, new URL(pending.issuer).host);
    return { returnTo: pending.returnTo || '#/mine' };
  } catch (err) {
    return { returnTo: '#/sign-in', error: `Signing in failed: ${err.message}` };
  }
}
