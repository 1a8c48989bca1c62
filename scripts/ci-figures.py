#!/usr/bin/env python3
"""The test command's figures, for docs/ci-time.md and each issue's allowance.

  ci-figures.py build  TIMING_HTML   CPU seconds per crate from `cargo build --timings`
                                     (workspace crates one by one, registry crates summed,
                                     the longest units)
  ci-figures.py tests  JUNIT_XML     nextest's per-test times: per e2e area (the module
                                     before `::`), per test binary, the slowest tests

Both only read what cargo and nextest wrote; nothing is measured here. A
unit's time in a timing report is wall time while both cores were shared
with other units, so sums compare runs on the same machine, not seconds of
one core.
"""
import collections
import json
import re
import sys
import xml.etree.ElementTree as ET


def workspace_crates():
    """Package names of the workspace's members, from `cargo metadata`."""
    import subprocess

    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--locked"],
        check=True, capture_output=True, text=True,
    ).stdout
    return {p["name"] for p in json.loads(out)["packages"]}


def build(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"const UNIT_DATA = (\[.*?\]);\n", text, re.S)
    if not m:
        sys.exit(f"{path}: no UNIT_DATA (not a cargo timing report?)")
    # Units cargo found fresh are listed with no time: left out.
    units = [u for u in json.loads(m.group(1)) if u["duration"] > 0]
    if not units:
        print("build: every unit was fresh (nothing compiled)")
        return
    ours = workspace_crates()
    wall = max(u["start"] + u["duration"] for u in units)
    total = sum(u["duration"] for u in units)
    per_crate = collections.Counter()
    deps = 0.0
    for u in units:
        if u["name"] in ours:
            per_crate[u["name"]] += u["duration"]
        else:
            deps += u["duration"]
    print(f"build: {len(units)} units, {wall:.0f} s wall, {total:.0f} s of units "
          f"({total / wall:.2f} busy on average)")
    print(f"  registry crates (all {sum(1 for u in units if u['name'] not in ours)} units): {deps:.0f} s")
    print(f"  workspace crates: {sum(per_crate.values()):.0f} s")
    for name, s in per_crate.most_common():
        print(f"    {s:6.1f} s  {name}")
    print("  the 15 longest units:")
    for u in sorted(units, key=lambda u: -u["duration"])[:15]:
        target = u.get("target", "").strip() or "lib"
        print(f"    {u['duration']:6.1f} s  {u['name']} {target}")


def tests(path):
    root = ET.parse(path).getroot()
    cases = []
    for suite in root.iter("testsuite"):
        binary = suite.get("name", "?")
        for case in suite.iter("testcase"):
            name = case.get("name", "?")
            secs = float(case.get("time", "0") or 0)
            failed = case.find("failure") is not None or case.find("error") is not None
            cases.append((binary, name, secs, failed))
    if not cases:
        sys.exit(f"{path}: no test cases")
    total = sum(c[2] for c in cases)
    print(f"tests: {len(cases)} cases, {total:.0f} s of test time in all "
          f"({sum(1 for c in cases if c[3])} failed)")
    per_binary = collections.Counter()
    per_area = collections.Counter()
    count_area = collections.Counter()
    for binary, name, secs, _ in cases:
        per_binary[binary] += secs
        if binary.startswith("e2e::"):
            area = name.split("::", 1)[0]
            per_area[area] += secs
            count_area[area] += 1
    print("  per test binary (s):")
    for binary, s in per_binary.most_common():
        print(f"    {s:7.1f}  {binary}")
    print("  per end-to-end area (s, tests):")
    for area, s in per_area.most_common():
        print(f"    {s:7.1f}  {count_area[area]:4}  {area}")
    print("  the 25 slowest tests (s):")
    for binary, name, secs, _ in sorted(cases, key=lambda c: -c[2])[:25]:
        print(f"    {secs:7.1f}  {binary} {name}")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "tests"):
        sys.exit(__doc__)
    {"build": build, "tests": tests}[sys.argv[1]](sys.argv[2])


if __name__ == "__main__":
    main()
