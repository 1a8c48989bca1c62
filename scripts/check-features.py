#!/usr/bin/env python3
"""Fails when a dev-dependency turns on a feature of a crate that the
binaries also use: cargo unifies features per build, so the test stage
would compile that crate, and every crate above it, a second time
(`tokio/test-util` in one crate's dev-dependencies once added 8 minutes to
a clean-clone run). Compares `cargo tree` with and without dev-dependencies.

Allowed: small leaf crates where the second copy costs seconds (listed
below with why); everything else must have one feature set.
"""
import subprocess
import sys

# Crate name -> why its second build is accepted.
ALLOWED = {
    "bit-vec": "proptest's bit-set turns on `default`; a leaf crate",
    "getrandom": "build scripts use it without features; a leaf crate",
    "syn": "proc-macros of dev-dependencies build it for the host",
    "proc-macro2": "proc-macros of dev-dependencies build it for the host",
}


def features(extra):
    out = subprocess.run(
        ["cargo", "tree", "--workspace", "--locked", "--prefix", "none", "-f", "{p} {f}", *extra],
        check=True, capture_output=True, text=True,
    ).stdout
    sets = {}
    for line in out.splitlines():
        words = [w for w in line.split() if w != "(*)"]
        if len(words) < 2:
            continue
        name, version = words[0], words[1]
        rest = [w for w in words[2:] if not w.startswith("(")]
        sets.setdefault((name, version), set()).add(rest[-1] if rest else "")
    return sets


def main():
    without_dev = features(["-e", "normal,build"])
    with_dev = features([])
    bad = []
    for key, sets in sorted(with_dev.items()):
        if key in without_dev and sets != without_dev[key] and key[0] not in ALLOWED:
            bad.append(f"  {key[0]} {key[1]}: binaries build it with {sorted(without_dev[key])}, tests with {sorted(sets)}")
    if bad:
        print("A dev-dependency changes the features of crates the binaries use; the test stage would build them twice:")
        print("\n".join(bad))
        print("Drop the feature from the dev-dependency (or enable it for the normal dependency, if it costs nothing at run time).")
        return 1
    print(f"features: one set per crate for binaries and tests ({len(without_dev)} crates)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
