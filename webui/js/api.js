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

// --- buying (consumer token) -------------------------------------------------

/** A plan's cap and holdings: { maxPurchases, active, available } (available null without a cap). */
export async function planCapacity(offerID, planID, signal) {
  const { data } = await request('GET', `${offerPath(offerID)}/plans/${encodeURIComponent(planID)}/capacity`, { signal });
  return data;
}

/** Set or lift (null) a plan's cap (its provider). */
export async function setPlanCapacity(offerID, planID, maxPurchases, token) {
  const { data } = await request('PUT', `${offerPath(offerID)}/plans/${encodeURIComponent(planID)}/capacity`, { body: { maxPurchases }, token });
  return data;
}

export async function reserve(offerID, planID, token) {
  const { data } = await request('POST', '/reservations', { body: { offerID, planID }, token });
  return data;
}

export async function getReservation(id, token) {
  const { data } = await request('GET', `/reservations/${encodeURIComponent(id)}`, { token });
  return data;
}

export async function releaseReservation(id, token) {
  const { data } = await request('DELETE', `/reservations/${encodeURIComponent(id)}`, { token });
  return data;
}

/** Buy a reservation; `body` is the contract's optional { consumerClusterID, durationSeconds }. */
export async function purchase(id, token, body = undefined) {
  const { data } = await request('POST', `/reservations/${encodeURIComponent(id)}/purchase`, { body, token });
  return data;
}

export async function cancelPurchase(id, token) {
  const { data } = await request('DELETE', `/purchases/${encodeURIComponent(id)}`, { token });
  return data;
}

export async function listReservations(token, params = {}) {
  const query = new URLSearchParams(params).toString();
  const { data } = await request('GET', `/reservations${query ? `?${query}` : ''}`, { token });
  return Array.isArray(data) ? data : [];
}

export async function listPurchases(token) {
  const { data } = await request('GET', '/purchases', { token });
  return Array.isArray(data) ? data : [];
}

/**
 * A contract (GET /contracts/{id}, with credentials for its consumer).
 * A catalog without contracts answers 404 for the route: then the purchase
 * (GET /purchases/{id}, with `peering`) stands in, marked `legacy: true`.
 */
export async function getContract(id, token) {
  try {
    const { data } = await request('GET', `/contracts/${encodeURIComponent(id)}`, { token });
    return data;
  } catch (err) {
    if (err.status !== 404 || !/no such page or route/.test(err.message)) throw err;
  }
  const { data } = await request('GET', `/purchases/${encodeURIComponent(id)}`, { token });
  return { ...data, legacy: true };
}

/** The caller's contracts (GET /contracts); null when the catalog has none (older catalog). */
export async function listContracts(token) {
  try {
    const { data } = await request('GET', '/contracts', { token });
    return Array.isArray(data) ? data : Array.isArray(data?.contracts) ? data.contracts : [];
  } catch (err) {
    if (err.status === 404 && /no such page or route/.test(err.message)) return null;
    throw err;
  }
}

/** The caller's service instances (GET /service-instances), newest first, from the catalog's records. */
export async function listServiceInstances(token) {
  const { data } = await request('GET', '/service-instances', { token });
  return Array.isArray(data) ? data : [];
}

/** One service instance (GET /service-instances/{id}); 404 (an ApiError) when it is not the caller's or gone. */
export async function getServiceInstance(id, token) {
  const { data } = await request('GET', `/service-instances/${encodeURIComponent(id)}`, { token });
  return data;
}
