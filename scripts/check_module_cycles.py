#!/usr/bin/env python3
"""Reports import circles between modules of each crate under crates/: module A uses B
(`use crate::b`, `crate::b::x`, `super::b`, brace groups such as `use super::{b, c::d}`) while B, directly or through others, uses A.

Checked at two granularities: source files, and the crate's top-level modules (a child
module using its own parent does not count there). Test code is left out: files named
tests.rs or under tests/ or testing/, and everything after a file's `#[cfg(test)]`.
Exits 1 when it finds a circle. Usage: scripts/check_module_cycles.py [crates/NAME ...]"""

import re
import sys
from pathlib import Path

USE = re.compile(r"\b(crate|super)((?:::[a-z_][a-z0-9_]*)+)")
USE_STATEMENT = re.compile(r"\buse\s+((?:crate|super)\b[^;]*);")


def split_top(text: str) -> list:
    """`a, b::{c, d}` split at the commas outside braces."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def expand_use(tree: str) -> list:
    """The paths a use tree names: `super::{a, b::{c, self}}` -> super::a, super::b::c,
    super::b. Aliases and globs name their path."""
    tree = re.sub(r"\s+as\s+\w+", "", tree.strip())
    brace = tree.find("{")
    if brace < 0:
        return [tree.removesuffix("::*").removesuffix("::self")]
    prefix = tree[:brace].removesuffix("::")
    inner = tree[brace + 1 : tree.rfind("}")]
    out = []
    for item in split_top(inner):
        for path in expand_use(item):
            out.append(prefix if path in ("self", "*") else f"{prefix}::{path}")
    return out


def module_path(src: Path, file: Path) -> tuple:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return tuple(parts)


def is_test_file(src: Path, file: Path) -> bool:
    rel = file.relative_to(src).parts
    return file.name == "tests.rs" or "tests" in rel[:-1] or "testing" in rel or file.stem.endswith("_tests")


def non_test_text(text: str) -> str:
    """The code before the file's tests, without comments (doc links are not imports)."""
    cut = text.find("#[cfg(test)]")
    code = text if cut < 0 else text[:cut]
    code = "\n".join(line.split("//", 1)[0] for line in code.splitlines())
    # Brace groups written out as one path each, so the plain pattern sees every module.
    return USE_STATEMENT.sub(
        lambda m: " ".join(f"use {path};" for path in expand_use(m.group(1))), code
    )


def edges_of(src: Path):
    files = {module_path(src, f): f for f in src.rglob("*.rs") if not is_test_file(src, f)}
    modules = set(files)
    edges = {m: set() for m in modules}
    for mod, file in files.items():
        is_dir_module = file.name in ("mod.rs", "lib.rs", "main.rs")
        for kind, rest in USE.findall(non_test_text(file.read_text())):
            path = [p for p in rest.split("::") if p]
            if kind == "crate":
                target = path
            else:
                # `super` from a/b.rs (module a::b) is module a; from a/b/mod.rs likewise.
                base = list(mod[:-1]) if not is_dir_module or mod else list(mod)
                while path and path[0] == "super":
                    path.pop(0)
                    base = base[:-1]
                target = base + path
            # The longest prefix that is a module of this crate.
            for n in range(len(target), -1, -1):
                t = tuple(target[:n])
                if t in modules:
                    if t != mod:
                        edges[mod].add(t)
                    break
    return edges


def cycles(edges):
    """Strongly connected components with more than one node."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def top_level(edges):
    top = {}
    for a, targets in edges.items():
        for b in targets:
            ta, tb = a[:1], b[:1]
            # A child using an ancestor is composition, not a circle.
            if ta != tb and ta and tb and b != a[: len(b)]:
                top.setdefault(ta, set()).add(tb)
    return top


def self_test():
    """Known answers of the brace expansion: a wrong one would hide circles."""
    assert expand_use("super::{a, b::{c, self}}") == ["super::a", "super::b::c", "super::b"]
    assert expand_use("crate::x::{y as z, w::*}") == ["crate::x::y", "crate::x::w"]
    assert expand_use("crate::a::b") == ["crate::a::b"]
    assert "use super::q;" in non_test_text("use super::{q};\n#[cfg(test)]\nuse super::t;")
    assert "super::t" not in non_test_text("use super::{q};\n#[cfg(test)]\nuse super::t;")


def main():
    self_test()
    roots = [Path(p) for p in sys.argv[1:]] or sorted(Path("crates").glob("*"))
    found = False
    for crate in roots:
        src = crate / "src"
        if not src.is_dir():
            continue
        edges = edges_of(src)
        for level, graph in (("file", edges), ("top-level module", top_level(edges))):
            for comp in cycles(graph):
                found = True
                names = ", ".join("::".join(m) or "crate root" for m in comp)
                print(f"{crate.name}: {level} circle: {names}")
    if not found:
        print("no import circles between modules")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
