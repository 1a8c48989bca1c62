// The consumer's automatic peering, step by step, read from what the
// catalog holds about a contract: `peeringState` (the provider's side: a
// peering user made for this consumer cluster) and the `state` and `reason`
// the consumer's purchase-controller reports. The controller writes its
// step as `Code: words`, `Code` being the Purchase condition's reason
// (docs/buying.md, "What the contract's reason says"); anything else is
// free text. Pure (no DOM), so node tests it.

/** The steps, in order. */
export const STEPS = [
  { key: 'issued', label: 'Peering user issued' },
  { key: 'released', label: 'Credentials released' },
  { key: 'authenticating', label: 'Authenticating' },
  { key: 'peered', label: 'Peered' },
  { key: 'granted', label: 'Slice granted' },
  { key: 'ready', label: 'Offloaded and ready' },
];

// The step a reported code is working on (purchase-controller's
// `decision.rs` and `authentication.rs` name them).
const CODE_STEP = {
  ProviderTenantNamespaceMissing: 'authenticating',
  WaitingForNonce: 'authenticating',
  WaitingForSignature: 'authenticating',
  NonceMismatch: 'authenticating',
  ConsumerKeyUnreadable: 'authenticating',
  WaitingForTenant: 'authenticating',
  ProviderUnreachable: 'authenticating',
  Authenticating: 'authenticating',
  IdentityCreated: 'peered',
  WaitingForPeering: 'peered',
  PeeringCommandRequired: 'peered',
  WaitingForProvider: 'granted',
  ResourcesDenied: 'granted',
  WaitingForLiqo: 'ready',
  NamespaceNotFound: 'ready',
  OffloadingNotOurs: 'ready',
  StrategyConflict: 'ready',
  ObjectRejected: 'peered',
  LiqoGenerationNotOffered: 'released',
  NoPeeringCredentials: 'released',
  ContractOfAnotherCluster: 'released',
};

// The step each reported state is working on (`ready` has none left).
const STATE_STEP = { pending: 'authenticating', peered: 'granted', granted: 'ready' };

/** `{code, words}` of a `Code: words` reason; `code` null for free text. */
export function splitReason(reason) {
  const text = String(reason ?? '');
  const match = /^([A-Z][A-Za-z0-9]*): ([\s\S]*)$/.exec(text);
  return match ? { code: match[1], words: match[2] } : { code: null, words: text || null };
}

/**
 * Where the automatic peering of contract `c` stands:
 * `{steps: [{key, label, status}], code, words, reported, fallback}`, each
 * status `done`, `current`, `failed` or `todo`. `reported`: a consumer
 * controller has reported on the contract (a reason, or a state past
 * `pending`). `fallback`: show the manual `liqoctl peer` command — no
 * controller has reported, or the one that did does not peer by itself
 * (`PeeringCommandRequired`).
 */
export function peeringSteps(c) {
  const { code, words } = splitReason(c.reason);
  const state = c.state ?? 'pending';
  const reported = Boolean(c.reason) || state !== 'pending';
  const index = (key) => STEPS.findIndex((s) => s.key === key);
  let current;
  if (state === 'ready') current = STEPS.length;
  else if (state === 'failed') current = code && CODE_STEP[code] ? index(CODE_STEP[code]) : null;
  else if (state === 'pending' && code && CODE_STEP[code]) current = index(CODE_STEP[code]);
  else if (reported) current = index(STATE_STEP[state] ?? 'authenticating');
  else if (c.peeringState?.state === 'awaitingCredentials') current = index('issued');
  else current = index('released');
  if (state === 'failed' && current === null) {
    // A failure in words only: the first step not known done failed.
    current = index(c.peeringState?.state === 'awaitingCredentials' ? 'issued' : 'authenticating');
  }
  const steps = STEPS.map((step, i) => {
    let status = 'todo';
    if (i < current) status = 'done';
    else if (i === current) status = state === 'failed' ? 'failed' : 'current';
    return { ...step, status };
  });
  return {
    steps,
    code,
    words,
    reported,
    fallback: !reported || code === 'PeeringCommandRequired',
  };
}
