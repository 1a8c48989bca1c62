// How the provider's views word a plan's last update, from the catalog's
// per-plan `updatedAt`/`updatedBy`.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ago, stampText } from '../../../webui/js/plan-activity.js';

test('"updated by the agent 3 min ago", from the stamp', () => {
  const now = Date.parse('2026-11-23T10:00:00Z');
  assert.equal(stampText({ updatedAt: '2026-11-23T09:57:00Z', updatedBy: 'provider-agent' }, now).text, 'updated by the agent 3 min ago');
  assert.equal(stampText({ updatedAt: '2026-11-23T08:00:00Z', updatedBy: 'provider' }, now).text, 'updated by the provider 2 h ago');
  assert.equal(stampText({ updatedAt: '2026-11-23T09:59:50Z', updatedBy: 'provider-agent' }, now).by, 'provider-agent');
  assert.equal(stampText({ updatedAt: null, updatedBy: null }, now), null, 'a plan the catalog never stamped');
  assert.equal(stampText(undefined, now), null);
  assert.equal(ago(now - 10000, now), 'just now');
  assert.equal(ago(now - 3 * 86400000, now), '3 days ago');
});
