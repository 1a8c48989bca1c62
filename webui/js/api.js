// The catalog's REST API, as the UI calls it. Every failure becomes an
// ApiError carrying the HTTP status and the server's message (error bodies
// are {"error": "...", "message": "..."}; the message names the field).

export class ApiError extends Error {
  /**
   * @param {number} status HTTP status, 0 when the catalog could not be reached
   * @param {string} message the server's message (or ours, for network errors)
   * @param {object} [body] the parsed error body, if any
   */
  constructor(status, message, body = null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = body?.error ?? null;
    /** A field path the server named explicitly, if its body has one. */
    this.field = body?.field ?? body?.path ?? null;
    this.body = body;
  }
}

async function request(method, path, { body, token, signal } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch (err) {
    if (err?.name === 'AbortError') throw err;
    throw new ApiError(0, 'The catalog could not be reached. Check that it is running and your network connection, then try again.');
  }
  const textBody = await response.text();
  let data = null;
  if (textBody) {
    try {
      data = JSON.parse(textBody);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const message = (data && typeof data === 'object' && (data.message || data.error))
      || textBody.trim()
      || `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, String(message), data && typeof data === 'object' ? data : null);
  }
  return { status: response.status, data };
}

const offerPath = (id) => `/offer/${encodeURIComponent(id)}`;

/** All offers, optionally filtered server-side (e.g. { provider: clusterID }). */
export async function listOffers(params = {}, signal) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== '' && v != null));
  const { data } = await request('GET', `/offers${query.toString() ? `?${query}` : ''}`, { signal });
  if (Array.isArray(data)) return data;
  if (data && Array.isArray(data.offers)) return data.offers;
  return [];
}

export async function getOffer(id, signal) {
  const { data } = await request('GET', offerPath(id), { signal });
  return data;
}

/** Create or replace the caller's offer; resolves to { created, offer } (offer null if the body had none). */
export async function saveOffer(id, offer, token) {
  const { status, data } = await request('POST', offerPath(id), { body: offer, token });
  return { created: status === 201, offer: data && typeof data === 'object' && data.id !== undefined ? data : null };
}

export async function deleteOffer(id, token) {
  await request('DELETE', offerPath(id), { token });
}

/** Exchange the cluster's peering credentials for a JWT: resolves to { token, expiresAt }. */
export async function authenticate(credentials) {
  const { data } = await request('POST', '/authenticate', { body: credentials });
  if (!data || typeof data.token !== 'string') {
    throw new ApiError(502, 'The catalog accepted the credentials but sent no token back.');
  }
  return data;
}
