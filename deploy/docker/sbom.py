#!/usr/bin/env python3
"""The SBOM of one image's binary, CycloneDX 1.5 JSON, on stdout:

    sbom.py <package> <binary>

Lists every crate that can be compiled into <binary> of the workspace
package <package>: the closure of its normal dependencies in
`cargo metadata --filter-platform <host>` (build scripts' and procedural
macros' dependencies run at build time and link nothing into the binary, so
they are left out), each with its version, licence, source and, for a
registry crate, the SHA-256 Cargo.lock pins and a purl scanners match
advisories on. Workspace crates carry no purl: crates.io has unrelated
crates of the same names (`catalog`, `quantity`), an advisory about which
must not be reported against ours.

`cargo metadata` resolves features for the whole workspace, all targets
included (the way the test command builds the binaries), so the list is the
union over every way this workspace builds the binary: a release build of
the one package (`cargo build -p <package>`) may compile fewer crates,
never more. scripts/check-image.py holds it against `cargo tree -p`.

Runs offline (`--offline --locked`): it follows a build, whose crates are
already downloaded. SBOM_CARGO_METADATA names a file holding that command's
output, read instead of running it (scripts/build-images.sh runs it once for
its nine images). SOURCE_DATE_EPOCH, if set, is the document's timestamp;
the serial number is derived from the content, so the same sources give
the same document.
"""
import datetime
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tomllib
import uuid

WORKSPACE = pathlib.Path(__file__).resolve().parent.parent.parent


def fail(message):
    print(f"sbom.py: {message}", file=sys.stderr)
    sys.exit(1)


def run(*argv):
    try:
        return subprocess.run(argv, cwd=WORKSPACE, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"{' '.join(argv)}: {getattr(e, 'stderr', '') or e}")


def host_target():
    for line in run("rustc", "-vV").splitlines():
        if line.startswith("host: "):
            return line.removeprefix("host: ")
    fail("rustc -vV names no host target")


def is_proc_macro(package):
    return any("proc-macro" in target["kind"] for target in package["targets"])


def license_expression(text):
    # Old manifests write `MIT/Apache-2.0`; SPDX (and CycloneDX) say OR.
    return " OR ".join(part.strip() for part in text.split("/"))


def main():
    if len(sys.argv) != 3:
        print("usage: sbom.py <package> <binary>", file=sys.stderr)
        sys.exit(2)
    name, binary = sys.argv[1:]
    host = host_target()
    cached = os.environ.get("SBOM_CARGO_METADATA")
    if cached:
        try:
            metadata = json.loads(pathlib.Path(cached).read_text())
        except (OSError, ValueError) as e:
            fail(f"SBOM_CARGO_METADATA={cached}: {e}")
    else:
        metadata = json.loads(
            run("cargo", "metadata", "--format-version", "1", "--offline", "--locked",
                "--filter-platform", host)
        )
    packages = {p["id"]: p for p in metadata["packages"]}
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    members = set(metadata["workspace_members"])
    roots = [i for i in members if packages[i]["name"] == name]
    if not roots:
        fail(f"no workspace package named {name}")
    root = roots[0]
    if not any(t["name"] == binary and "bin" in t["kind"] for t in packages[root]["targets"]):
        fail(f"package {name} has no binary {binary}")
    lock = tomllib.loads((WORKSPACE / "Cargo.lock").read_text())
    checksums = {(p["name"], p["version"]): p.get("checksum") for p in lock["package"]}

    # The normal-dependency closure, procedural macros (and what only they
    # use) excluded.
    edges = {}
    todo, seen = [root], {root}
    while todo:
        current = todo.pop()
        edges[current] = []
        for dep in nodes[current]["deps"]:
            normal = any(kind["kind"] is None for kind in dep["dep_kinds"])
            if not normal or is_proc_macro(packages[dep["pkg"]]):
                continue
            edges[current].append(dep["pkg"])
            if dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                todo.append(dep["pkg"])

    def ref(i):
        p = packages[i]
        if i in members:
            return f"workspace:{p['name']}@{p['version']}"
        return f"pkg:cargo/{p['name']}@{p['version']}"

    def component(i, kind):
        p = packages[i]
        c = {"type": kind, "bom-ref": ref(i), "name": p["name"], "version": p["version"]}
        if p["description"]:
            c["description"] = p["description"].strip()
        if p["license"]:
            c["licenses"] = [{"expression": license_expression(p["license"])}]
        if i in members:
            c["properties"] = [{"name": "cargo:source", "value": "workspace"}]
        else:
            if not (p["source"] or "").startswith("registry+"):
                fail(f"{p['name']} {p['version']} comes from {p['source']}: only registry and workspace crates are described")
            c["purl"] = ref(i)
            checksum = checksums.get((p["name"], p["version"]))
            if not checksum:
                fail(f"Cargo.lock pins no checksum for {p['name']} {p['version']}")
            c["hashes"] = [{"alg": "SHA-256", "content": checksum}]
            c["properties"] = [{"name": "cargo:source", "value": p["source"]}]
        if p["repository"]:
            c["externalReferences"] = [{"type": "vcs", "url": p["repository"]}]
        return c

    main_component = component(root, "application")
    main_component["properties"].append({"name": "cargo:binary", "value": binary})
    document = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": "deploy/docker/sbom.py"}]},
            "component": main_component,
            "properties": [{"name": "cargo:target", "value": host}],
        },
        "components": sorted(
            (component(i, "library") for i in seen if i != root), key=lambda c: c["bom-ref"]
        ),
        "dependencies": sorted(
            ({"ref": ref(i), "dependsOn": sorted({ref(d) for d in deps})} for i, deps in edges.items()),
            key=lambda d: d["ref"],
        ),
    }
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        try:
            stamp = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc)
        except ValueError:
            fail(f"SOURCE_DATE_EPOCH={epoch} is not a number of seconds")
        document["metadata"]["timestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    body = json.dumps(document, sort_keys=True).encode()
    document["serialNumber"] = uuid.uuid5(uuid.NAMESPACE_URL, hashlib.sha256(body).hexdigest()).urn
    json.dump(document, sys.stdout, indent=1, sort_keys=True)
    print()


main()
