// A minimal sequential test runner: the scenarios share one catalog and one
// browser (each builds on what the previous published), so they run in
// order; a failure is recorded with a screenshot and the run goes on.
// BROWSER_TESTS_ONLY=<regex> runs only the scenarios whose name matches (a
// scenario that needs an earlier one's offers then fails: use it for
// self-contained ones while working on them).

export class Runner {
  constructor({ onFailure } = {}) {
    this.results = [];
    this.onFailure = onFailure;
  }

  async test(name, fn) {
    const only = process.env.BROWSER_TESTS_ONLY;
    if (only && !new RegExp(only).test(name)) return;
    const started = Date.now();
    try {
      await fn();
      this.results.push({ name, ok: true });
      console.log(`  ok   ${name} (${Date.now() - started} ms)`);
    } catch (err) {
      this.results.push({ name, ok: false, err });
      console.log(`  FAIL ${name} (${Date.now() - started} ms)`);
      console.log(indent(err?.stack ?? String(err)));
      if (this.onFailure) {
        try {
          await this.onFailure(name);
        } catch (shotErr) {
          console.log(indent(`(could not save failure screenshots: ${shotErr.message})`));
        }
      }
    }
  }

  get passed() {
    return this.results.filter((r) => r.ok).length;
  }

  get failed() {
    return this.results.filter((r) => !r.ok).length;
  }
}

function indent(text) {
  return text.split('\n').map((line) => `       ${line}`).join('\n');
}

/** Throw unless `condition`, with `message`. */
export function check(condition, message) {
  if (!condition) throw new Error(message);
}

/** Throw unless a deep-equal b (JSON comparison, enough for strings and arrays of strings). */
export function checkEqual(actual, expected, what) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Error(`${what}: expected ${e}, got ${a}`);
}
