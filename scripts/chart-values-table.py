#!/usr/bin/env python3
"""The values table of charts/liqo-broker/README.md, generated from the
comments of charts/liqo-broker/values.yaml (as helm-docs does for other
charts, with the standard library only): one row per documented key, its
default and the comment lines right above it.

    python3 scripts/chart-values-table.py           # print the table
    python3 scripts/chart-values-table.py --write   # replace it in the README
    python3 scripts/chart-values-table.py --check   # exit 1 if the README's differs

The README's table sits between the two marker comments below. The rules,
which values.yaml follows:
- a comment block directly above a key (no blank line between) describes
  it; a block followed by a blank line is a section's heading, not a key's;
- a key without a comment of its own joins the row of the sibling above it
  (`catalog.nodeSelector`, `.tolerations`, … share one row); the first
  keys of a documented map without comments of their own take the map's
  comment (`catalog.enabled` is described by `catalog`'s);
- a map none of whose keys is documented is one row, its default written
  out in flow style (`resources`);
- lists are written in flow style (`[a, b]`), never as `- ` items.
"""
import argparse
import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
VALUES = ROOT / "charts/liqo-broker/values.yaml"
README = ROOT / "charts/liqo-broker/README.md"
START = ("<!-- values table: generated from values.yaml's comments by "
         "scripts/chart-values-table.py --write; edit the comments, not the table -->")
END = "<!-- end of the values table -->"

KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_./-]+):(?: +(?P<value>.*))?$")


class Node:
    def __init__(self, key, indent, comment, value, line):
        self.key = key
        self.indent = indent
        self.comment = comment  # list of lines, [] when undocumented
        self.value = value  # raw scalar text, "|" for a block scalar, None for a map
        self.children = []
        self.line = line

    def documented_below(self):
        return any(c.comment or c.documented_below() for c in self.children)


def parse(text):
    """The key tree of values.yaml (the subset it is written in)."""
    root = Node("", -1, [], None, 0)
    stack = [root]
    comment = []
    block_indent = None  # inside a block scalar: the indent of its key
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if block_indent is not None:
            if not stripped or indent > block_indent:
                continue
            block_indent = None
        if not stripped:
            comment = []
            continue
        if stripped.startswith("#"):
            comment.append(stripped[1:].strip())
            continue
        if stripped.startswith("- "):
            sys.exit(f"{VALUES}:{number}: write lists in flow style ([a, b]) for the values table")
        match = KEY.match(line)
        if not match:
            sys.exit(f"{VALUES}:{number}: not a key the values table understands: {line!r}")
        value = match.group("value")
        if value is not None:
            value = re.sub(r"\s+#.*$", "", value).strip()
            if value in ("|", "|-", ">", ">-"):
                block_indent = indent
                value = "|"
        while stack[-1].indent >= indent:
            stack.pop()
        node = Node(match.group("key"), indent, comment, value or None, number)
        stack[-1].children.append(node)
        if node.value is None:
            stack.append(node)
        comment = []
    return root


def flow(node):
    """A node's value in YAML flow style."""
    if node.value is not None:
        return node.value
    return "{" + ", ".join(f"{c.key}: {flow(c)}" for c in node.children) + "}"


def default(node):
    if node.value == "|":
        return "*multi-line text*"
    return "`" + flow(node).replace("|", "\\|") + "`"


def describe(lines):
    """Comment lines as one table cell: `<`, `>` escaped outside code, `|` everywhere."""
    # A shell command's continuation backslash ends no line of a cell.
    text = " ".join(" ".join(line.rstrip("\\").split()) for line in lines)
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).replace("|", "\\|")


def rows(node, path, out):
    """Append [keys, defaults, comment] rows for node's children."""
    current = None
    for index, child in enumerate(node.children):
        name = f"{path}{child.key}"
        if child.value is None and child.documented_below():
            current = None
            if child.comment:
                leading = []
                for grandchild in child.children:
                    if grandchild.comment or (grandchild.value is None and grandchild.documented_below()):
                        break
                    leading.append(grandchild)
                if leading:
                    out.append([[f"{name}.{g.key}" for g in leading], [default(g) for g in leading], child.comment])
                    child = Node(child.key, child.indent, child.comment, None, child.line)
                    child.children = [c for c in node.children[index].children if c not in leading]
                else:
                    out.append([[name], [""], child.comment])
            rows(child, f"{name}.", out)
            continue
        if child.comment or current is None:
            current = [[name], [default(child)], child.comment]
            out.append(current)
        else:
            current[0].append(name)
            current[1].append(default(child))


def table(text):
    out = []
    rows(parse(text), "", out)
    lines = ["| Value | Default | What |", "|---|---|---|"]
    for keys, defaults, comment in out:
        first = keys[0]
        shown = [f"`{first}`"] + [f"`.{k.rsplit('.', 1)[1]}`" for k in keys[1:]]
        lines.append(f"| {', '.join(shown)} | {', '.join(d for d in defaults if d)} | {describe(comment)} |")
    return "\n".join(lines) + "\n"


def readme_parts(text):
    try:
        head, rest = text.split(START + "\n", 1)
        body, tail = rest.split(END, 1)
    except ValueError:
        sys.exit(f"{README}: the markers of the values table are missing:\n{START}\n{END}")
    return head, body, tail


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 when the README's table differs")
    mode.add_argument("--write", action="store_true", help="replace the README's table")
    args = parser.parse_args()
    generated = table(VALUES.read_text())
    if not (args.check or args.write):
        sys.stdout.write(generated)
        return 0
    readme = README.read_text()
    head, body, tail = readme_parts(readme)
    if args.write:
        README.write_text(head + START + "\n" + generated + END + tail)
        return 0
    if body != generated:
        sys.stdout.writelines(difflib.unified_diff(
            body.splitlines(True), generated.splitlines(True),
            f"{README.relative_to(ROOT)} (its table)", "values.yaml's comments"))
        print(f"{README.relative_to(ROOT)}: the values table is not values.yaml's: "
              "run python3 scripts/chart-values-table.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
