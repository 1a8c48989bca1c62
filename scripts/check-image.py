#!/usr/bin/env python3
"""Holds one built image to what docs/images.md promises scanners:

    check-image.py <rootfs> <image> <package> <binary> <inspect.json> KEY=VALUE...

<rootfs> is the image's unpacked root file system, <inspect.json> what
`buildah inspect --type image` says of it (its labels are read there),
KEY=VALUE the build arguments the image was built with
(scripts/image-build-args.sh: VERSION, REVISION, CREATED, SOURCE).

- Package entries: every file the image holds, except what the project
  itself puts there (the binary, its SBOM, the CA bundle, the dpkg entries),
  is listed with its MD5 in a var/lib/dpkg/status.d/<package>.md5sums, and
  that package has its status entry (installed); /etc/os-release names the
  distribution. A library without an entry is one a scanner cannot see.
- Labels: org.opencontainers.image.{title,version,revision,created,source,
  licenses} carry the build's values (the licence: the package's, as its
  SBOM says).
- SBOM: /usr/share/sbom/<binary>.cdx.json is CycloneDX describing <package>,
  and lists every crate `cargo tree -p <package> -e normal,no-proc-macro`
  says a build of the package compiles into it, at that version; each
  registry crate with the purl and the SHA-256 Cargo.lock pins.

Prints one line per check; the first failure exits 1, naming what is wrong.
"""
import hashlib
import json
import pathlib
import subprocess
import sys
import tomllib

WORKSPACE = pathlib.Path(__file__).resolve().parent.parent


def fail(message):
    print(f"check-image: {message}", file=sys.stderr)
    sys.exit(1)


def stanza(text):
    """The fields of one dpkg status entry (continuation lines dropped)."""
    fields = {}
    for line in text.splitlines():
        if line and not line[0].isspace() and ":" in line:
            key, value = line.split(":", 1)
            fields[key] = value.strip()
    return fields


def check_packages(rootfs, binary):
    status = rootfs / "var/lib/dpkg/status.d"
    ours = {
        f"usr/local/bin/{binary}",
        f"usr/share/sbom/{binary}.cdx.json",
        "etc/ssl/certs/ca-certificates.crt",
    }
    listed = {}
    for md5sums in sorted(status.glob("*.md5sums")):
        package = md5sums.name.removesuffix(".md5sums")
        entry = status / package
        if not entry.is_file():
            fail(f"{md5sums.relative_to(rootfs)} has no status entry {entry.relative_to(rootfs)}")
        fields = stanza(entry.read_text())
        if fields.get("Package") != package or fields.get("Status") != "install ok installed":
            fail(f"{entry.relative_to(rootfs)} is not the installed package {package}'s entry: {fields.get('Package')}, {fields.get('Status')}")
        for line in md5sums.read_text().splitlines():
            md5, path = line.split(maxsplit=1)
            listed[path] = (package, md5)
    shipped = 0
    for path in sorted(rootfs.rglob("*")):
        relative = str(path.relative_to(rootfs))
        if path.is_symlink():
            fail(f"/{relative} is a symbolic link: rootfs.sh copies files, a link could point outside what the entries list")
        if path.is_dir() or relative in ours or relative.startswith("var/lib/dpkg/status.d/"):
            continue
        if relative not in listed:
            fail(f"/{relative} belongs to no package entry in /var/lib/dpkg/status.d: a scanner cannot see it")
        package, md5 = listed[relative]
        actual = hashlib.md5(path.read_bytes()).hexdigest()
        if actual != md5:
            fail(f"/{relative} has MD5 {actual}, its entry in {package}.md5sums says {md5}")
        shipped += 1
    if not (status / "ca-certificates").is_file():
        fail("no status entry for ca-certificates, whose certificates the CA bundle holds")
    os_release = rootfs / "etc/os-release"
    if not os_release.is_file() or "ID=debian" not in os_release.read_text().splitlines():
        fail("/etc/os-release is missing or names no Debian: scanners would not know which advisories apply")
    packages = sorted(p.name for p in status.iterdir() if not p.name.endswith(".md5sums"))
    print(f"package entries: {shipped} files from {', '.join(packages)}, each listed with its MD5")


def check_labels(inspect_file, image, expected, license_):
    labels = json.loads(inspect_file.read_text())["OCIv1"]["config"].get("Labels") or {}
    want = {
        "title": image,
        "version": expected["VERSION"],
        "revision": expected["REVISION"],
        "created": expected["CREATED"],
        "source": expected["SOURCE"],
        "licenses": license_,
    }
    for key, value in want.items():
        label = f"org.opencontainers.image.{key}"
        if labels.get(label) != value:
            fail(f"label {label} is {labels.get(label)!r}, expected {value!r}")
    print(f"labels: {', '.join(f'{k}={v}' for k, v in want.items())}")


def cargo_tree(package):
    host = next(
        line.removeprefix("host: ")
        for line in subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout.splitlines()
        if line.startswith("host: ")
    )
    out = subprocess.run(
        ["cargo", "tree", "--offline", "--locked", "-p", package, "-e", "normal,no-proc-macro",
         "--target", host, "--prefix", "none", "-f", "{p}"],
        cwd=WORKSPACE, check=True, capture_output=True, text=True,
    ).stdout
    crates = set()
    for line in out.splitlines():
        # `name v1.2.3`, then ` (/path)` for a workspace crate, ` (*)` for a repeat.
        name, version = line.split()[:2]
        crates.add((name, version.removeprefix("v")))
    return crates


def check_sbom(rootfs, package, binary):
    path = rootfs / f"usr/share/sbom/{binary}.cdx.json"
    if not path.is_file():
        fail(f"no SBOM at /{path.relative_to(rootfs)}")
    sbom = json.loads(path.read_text())
    if sbom.get("bomFormat") != "CycloneDX":
        fail(f"/{path.relative_to(rootfs)} is not a CycloneDX document")
    main = sbom["metadata"]["component"]
    properties = {p["name"]: p["value"] for p in main.get("properties", [])}
    if main["name"] != package or properties.get("cargo:binary") != binary:
        fail(f"the SBOM describes {main['name']} ({properties.get('cargo:binary')}), not {package} ({binary})")
    components = {(c["name"], c["version"]): c for c in sbom["components"]}
    components[(main["name"], main["version"])] = main
    lock = tomllib.loads((WORKSPACE / "Cargo.lock").read_text())
    checksums = {(p["name"], p["version"]): p.get("checksum") for p in lock["package"]}
    compiled = cargo_tree(package)
    missing = sorted(compiled - components.keys())
    if missing:
        fail(f"the SBOM lacks {len(missing)} crate(s) `cargo tree -p {package}` compiles in: "
             + ", ".join(f"{n} {v}" for n, v in missing[:20]))
    for (name, version), c in components.items():
        checksum = checksums.get((name, version))
        if checksum is None:
            continue  # a workspace crate: no registry checksum, no purl
        hashes = {h["alg"]: h["content"] for h in c.get("hashes", [])}
        if c.get("purl") != f"pkg:cargo/{name}@{version}" or hashes.get("SHA-256") != checksum:
            fail(f"the SBOM's {name} {version} has purl {c.get('purl')} and SHA-256 {hashes.get('SHA-256')}, "
                 f"Cargo.lock pins {checksum}")
    print(f"SBOM: {len(components)} crates; the {len(compiled)} of `cargo tree -p {package}` all listed, "
          f"registry crates with Cargo.lock's SHA-256")
    return main.get("licenses", [{}])[0].get("expression")


def main():
    if len(sys.argv) < 6:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        sys.exit(2)
    rootfs, image, package, binary, labels = sys.argv[1:6]
    expected = dict(arg.split("=", 1) for arg in sys.argv[6:])
    for key in ("VERSION", "REVISION", "CREATED", "SOURCE"):
        if key not in expected:
            fail(f"no expected {key}= given")
    rootfs = pathlib.Path(rootfs)
    check_packages(rootfs, binary)
    license_ = check_sbom(rootfs, package, binary)
    check_labels(pathlib.Path(labels), image, expected, license_)


main()
