// The service instances this browser provisioned for a consumer, so the
// page can follow one after a reload and find it again from its service's
// page: ids only (instance, OSB service and plan, binding and where its
// Secret goes, the operation being followed) — never the kubeconfig or the
// credentials. Kept in localStorage per consumer subject; the catalog holds
// the truth (an instance it no longer knows is dropped when found gone).

const KEY = 'catalog.service-instances';

function readAll() {
  try {
    const all = JSON.parse(localStorage.getItem(KEY) ?? '{}');
    return all && typeof all === 'object' && !Array.isArray(all) ? all : {};
  } catch {
    return {};
  }
}

function writeAll(all) {
  try {
    localStorage.setItem(KEY, JSON.stringify(all));
  } catch {
    // Storage full or denied: the page still works, only without finding the instance again later.
  }
}

/** The consumer's instances, newest first. */
export function instancesOf(subject) {
  const mine = readAll()[subject];
  return Array.isArray(mine) ? [...mine].sort((a, b) => String(b.createdAt).localeCompare(String(a.createdAt))) : [];
}

/** One instance record, or null. */
export function instanceRecord(subject, id) {
  return instancesOf(subject).find((r) => r.id === id) ?? null;
}

/** Add or update a record (merged by `id`); returns the record as stored. */
export function saveInstance(subject, record) {
  const all = readAll();
  const mine = Array.isArray(all[subject]) ? all[subject] : [];
  const at = mine.findIndex((r) => r.id === record.id);
  const merged = at >= 0 ? { ...mine[at], ...record } : { createdAt: new Date().toISOString(), ...record };
  if (at >= 0) mine[at] = merged;
  else mine.push(merged);
  all[subject] = mine;
  writeAll(all);
  return merged;
}

export function forgetInstance(subject, id) {
  const all = readAll();
  if (!Array.isArray(all[subject])) return;
  all[subject] = all[subject].filter((r) => r.id !== id);
  writeAll(all);
}
