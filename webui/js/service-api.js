// The catalog's Open Service Broker API (v2.17), as the service page calls
// it with the consumer's bearer token — the same requests a platform makes:
// provision and bind with `accepts_incomplete=true`, then poll
// `last_operation`. OSB error bodies are {"error"?, "description"}; the
// description names the field a 400 is about.

export const OSB_VERSION = '2.17';

export class OsbError extends Error {
  /**
   * @param {number} status HTTP status, 0 when the catalog could not be reached
   * @param {string} message the broker's `description` (or ours)
   * @param {string|null} code the broker's `error` code (AsyncRequired, ConcurrencyError, …)
   */
  constructor(status, message, code = null) {
    super(message);
    this.name = 'OsbError';
    this.status = status;
    this.code = code;
  }
}

async function osb(method, path, token, { query = {}, body } = {}) {
  const params = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== undefined && v !== null));
  const headers = { Accept: 'application/json', Authorization: `Bearer ${token}`, 'X-Broker-API-Version': OSB_VERSION };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(`${path}${params.toString() ? `?${params}` : ''}`, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin', cache: 'no-store',
    });
  } catch {
    throw new OsbError(0, 'The catalog could not be reached. Check that it is running and your network connection, then try again.');
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = (data && (data.description || data.message || data.error)) || text.trim() || `${response.status} ${response.statusText}`;
    throw new OsbError(response.status, String(message), data?.error ?? null);
  }
  const retryAfter = Number(response.headers.get('Retry-After'));
  return { status: response.status, data: data ?? {}, retryAfter: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : null };
}

const instancePath = (id) => `/v2/service_instances/${encodeURIComponent(id)}`;
const bindingPath = (id, binding) => `${instancePath(id)}/service_bindings/${encodeURIComponent(binding)}`;

/** A new instance or binding id (a random UUID, as platforms choose them). */
export function newId() {
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  // Pages served over plain HTTP from another host have no randomUUID: an RFC 9562 v4 by hand.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The OSB service and plan ids of an offer's plan (from `GET /v2/catalog`), or null if it is not on sale. */
export async function osbIds(token, offerID, planKey) {
  const { data } = await osb('GET', '/v2/catalog', token);
  const service = (data.services ?? []).find((s) => s?.metadata?.offerID === offerID);
  const plan = service?.plans?.find((p) => p?.metadata?.planID === planKey);
  return service && plan ? { serviceID: service.id, planID: plan.id } : null;
}

/**
 * Provision: `PUT /v2/service_instances/{id}?accepts_incomplete=true` with
 * the customer's peering kubeconfig in `context.peering`. Resolves to the
 * operation id of the 202.
 */
export async function provision(token, id, { serviceID, planID, parameters, kubeconfig, space }) {
  const { data } = await osb('PUT', instancePath(id), token, {
    query: { accepts_incomplete: 'true' },
    body: {
      service_id: serviceID,
      plan_id: planID,
      // Required by OSB v2.17; this UI is its own platform, each consumer one space.
      organization_guid: 'liqo-broker-webui',
      space_guid: space,
      context: { platform: 'liqo-broker-webui', peering: { kubeconfig } },
      parameters,
    },
  });
  return data.operation ?? null;
}

/** `GET …/last_operation`: { state, description, retryAfter }; 410 (gone) is an OsbError. */
export async function lastOperation(token, id, operation) {
  const { data, retryAfter } = await osb('GET', `${instancePath(id)}/last_operation`, token, { query: { operation } });
  return { state: data.state, description: data.description ?? '', retryAfter };
}

/** Deprovision with `accepts_incomplete=true`; resolves to the operation id (null for a 200). */
export async function deprovision(token, id, { serviceID, planID }) {
  const { data } = await osb('DELETE', instancePath(id), token, { query: { service_id: serviceID, plan_id: planID, accepts_incomplete: 'true' } });
  return data.operation ?? null;
}

/** Bind with `accepts_incomplete=true`; resolves to the operation id of the 202 (null for a 200/201). */
export async function bind(token, id, binding, { serviceID, planID, parameters }) {
  const { data } = await osb('PUT', bindingPath(id, binding), token, {
    query: { accepts_incomplete: 'true' },
    body: { service_id: serviceID, plan_id: planID, parameters },
  });
  return data.operation ?? null;
}

/** The binding's `last_operation`: { state, description, retryAfter }. */
export async function bindingLastOperation(token, id, binding, operation) {
  const { data, retryAfter } = await osb('GET', `${bindingPath(id, binding)}/last_operation`, token, { query: { operation } });
  return { state: data.state, description: data.description ?? '', retryAfter };
}

/** The binding (`GET`): its credentials' keys are what the page shows, never their values. */
export async function fetchBinding(token, id, binding) {
  const { data } = await osb('GET', bindingPath(id, binding), token);
  return data;
}

/** Unbind with `accepts_incomplete=true`; resolves to the operation id (null for a 200). */
export async function unbind(token, id, binding, { serviceID, planID }) {
  const { data } = await osb('DELETE', bindingPath(id, binding), token, { query: { service_id: serviceID, plan_id: planID, accepts_incomplete: 'true' } });
  return data.operation ?? null;
}
