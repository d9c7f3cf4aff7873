#!/usr/bin/env python3
"""Find import circles between the modules of each crate in a Cargo workspace.

Usage: python3 .ci/modules.py [WORKSPACE_ROOT] [--edges]

Prints every strongly connected component of more than one module (its files
and each edge between them, with the line that makes it) and exits 1 if there
is any; exits 0 and prints a one-line summary otherwise. `--edges` also prints
every edge found, to check what the script saw.

Crates. The workspace `Cargo.toml` names the members; the root is a crate too
when it has a `[package]`. In each, `src/lib.rs`, `src/main.rs` and every
`src/bin/*.rs` (or `src/bin/*/main.rs`) is a crate root of its own. Crates are
checked one at a time: cargo already forbids circles between crates, so paths
into another crate (`tributary_timeline::...`, `std::...`) are ignored.

Modules. The tree is followed from each root through `mod name;`
declarations (`name.rs` or `name/mod.rs` beside a `lib.rs`/`main.rs`/`mod.rs`,
`dir/name.rs` beside `dir.rs`, and `#[path = "..."]`). A module declared
under `#[cfg(test)]` is test code and left out with all its file. Inline
modules (`mod keys { ... }`) are followed for name resolution, but count as
part of the file that holds them: a node of the graph is a file.

What is left out. Comments, string and char literals, and every item under
`#[cfg(test)]` (or `#[cfg(all(test, ...))]`): `mod tests { ... }`, test-only
functions, imports and fields. `#[cfg(not(test))]` and feature cfgs are kept.

Edges. A file A has an edge to file B when code in A names something in B:
 - a `use` of an item: `use crate::a::Item;`, `use super::Item;`,
   `use self::child::Item;`, groups `use crate::{a, b::c};`, renames, and
   2018-style relative paths (`use child::Item;`, `pub use child::Item;`);
   a glob `use crate::a::*;` is an edge to `a`;
 - a path in code: `crate::a::f(...)`, `super::x::Y`, `self::c::Z`, and a
   path whose first segment is a child module or a name brought in by a `use`
   (`use crate::protocol; ... protocol::heartbeat::beat()` is an edge to
   `protocol/heartbeat.rs`, not to `protocol/mod.rs`).
A `use` that only brings a module's name into scope is not an edge by itself;
the paths through that name are. `pub(in crate::a)` is not an edge.

Resolution. A path resolves to the deepest existing module along it; the next
segment is the item. If that module's file defines the item (fn, struct,
enum, trait, type, const, static, union, mod), the edge goes to that file. If
the module only imports the item (`pub use child::X`, or a private `use` that
a child reaches through `super::X`), the import is followed, as many times as
needed, to the file that defines the item; so `crate::Table` re-exported by
`lib.rs` from `table.rs` is an edge to `table.rs`, and a facade `lib.rs` does
not make every crate circular. An item imported from outside the crate
(`super::Arc` where the parent has `use std::sync::Arc`) is no edge. Globs
are followed when the name is found behind them; otherwise the edge goes to
the module named.

Which edges count, decided so that what is reported is a real circle:
 - an edge from a file to itself (and to inline modules in it) is dropped;
 - declaring `mod child;` is structure, not an edge;
 - a parent that uses or re-exports a child's item (`pub use child::X`) has
   an edge parent -> child, and a child that uses an item defined in its
   parent's file (`super::X`, `crate::X` for an item `lib.rs` defines) has an
   edge child -> parent. Both together are a circle and are reported: the
   parent's file should then stop defining what its children use (move X
   into a module of its own).

Limits: macro-generated paths, `macro_rules!` textual scope and names
resolved through a trait or a type alias's impls are not seen; the item
detection is lexical (top-level `fn`/`struct`/... at the module's brace
depth). It is a linter, not a compiler.
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from dataclasses import dataclass, field

# ---------------------------------------------------------------- lexing


def strip_source(text: str) -> str:
    """Blanks comments, strings and char literals, keeping line breaks."""
    out = []
    i, n = 0, len(text)

    def blank(s: str) -> str:
        return "".join("\n" if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif (m := re.compile(r'(?:b|c)?r(#*)"').match(text, i)) and (
            i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            close = '"' + m.group(1)
            j = text.find(close, m.end())
            j = n if j < 0 else j + len(close)
            out.append(" " + blank(text[i + 1 : j - 1]) + " ")
            i = j
        elif c == '"' or (
            c in "bc"
            and text.startswith('"', i + 1)
            and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))
        ):
            j = i + (1 if c == '"' else 2)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append('"' + blank(text[i + 1 : j - 1]) + '"')
            i = j
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}', b'x') or a lifetime ('a).
            m = re.compile(r"'(?:\\(?:u\{[0-9a-fA-F]*\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'").match(
                text, i
            )
            if m:
                out.append("' " + " " * (m.end() - i - 3) + "'")
                i = m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


TOKEN = re.compile(r"r#[A-Za-z_]\w*|[A-Za-z_]\w*|\$[A-Za-z_]\w*|::|\d[\w.]*|\S")


@dataclass
class Tok:
    text: str
    line: int


def tokenize(text: str) -> list[Tok]:
    toks = []
    line = 1
    pos = 0
    for m in TOKEN.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        t = m.group(0)
        if t.startswith("r#"):
            t = t[2:]
        toks.append(Tok(t, line))
    return toks


# ------------------------------------------------- removing #[cfg(test)] items

ITEM_WORDS = {
    "fn", "impl", "struct", "enum", "mod", "use", "trait", "const", "static",
    "type", "pub", "async", "unsafe", "extern", "let", "macro_rules", "union",
}
OPEN = {"(": ")", "[": "]", "{": "}"}
CLOSE = {")", "]", "}"}


def attribute_end(toks: list[Tok], i: int) -> int:
    """Given toks[i] == '#', returns the index after the attribute's `]`."""
    j = i + 1
    if j < len(toks) and toks[j].text == "!":
        j += 1
    if j >= len(toks) or toks[j].text != "[":
        return i + 1
    depth = 0
    while j < len(toks):
        t = toks[j].text
        if t in OPEN:
            depth += 1
        elif t in CLOSE:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return j


def is_test_cfg(attr: list[str]) -> bool:
    """`cfg(test)` or `cfg(all(test, ...))`: compiled only for tests."""
    s = "".join(attr)
    body = s[s.index("[") + 1 : -1] if "[" in s else ""
    if body == "cfg(test)":
        return True
    m = re.fullmatch(r"cfg\(all\((.*)\)\)", body)
    return bool(m) and "test" in m.group(1).split(",")


def item_end(toks: list[Tok], i: int) -> int:
    """Index after the item (or field, or statement) starting at toks[i]."""
    j = i
    # Further attributes of the same item.
    while j < len(toks) and toks[j].text == "#":
        j = attribute_end(toks, j)
    first = toks[j].text if j < len(toks) else ""
    kw = first
    k = j
    while k < len(toks) and toks[k].text in ("pub", "async", "unsafe", "extern", "(", "crate", "super", "in", "self", ")"):
        if toks[k].text == "pub" and k + 1 < len(toks) and toks[k + 1].text == "(":
            k += 1
            while k < len(toks) and toks[k].text != ")":
                k += 1
        k += 1
    if k < len(toks):
        kw = toks[k].text
    is_item = first in ITEM_WORDS
    to_semicolon = kw in ("use", "const", "static", "type", "let")
    depth = 0
    while j < len(toks):
        t = toks[j].text
        if t in OPEN:
            depth += 1
        elif t in CLOSE:
            if depth == 0:
                return j  # the enclosing block closes: a field or last arm
            depth -= 1
            if depth == 0 and t == "}" and not to_semicolon:
                return j + 1
        elif t == ";" and depth == 0:
            return j + 1
        elif t == "," and depth == 0 and not is_item:
            return j + 1
        j += 1
    return j


def drop_test_items(toks: list[Tok]) -> tuple[list[Tok], bool]:
    """Tokens without `#[cfg(test)]` items; True if the whole file is test-only."""
    out: list[Tok] = []
    i = 0
    while i < len(toks):
        if toks[i].text == "#":
            end = attribute_end(toks, i)
            attr = [t.text for t in toks[i:end]]
            if len(attr) > 1 and attr[1] == "!" and is_test_cfg(attr[1:]):
                return [], True
            if is_test_cfg(attr):
                i = item_end(toks, end)
                continue
            out.extend(toks[i:end])
            i = end
            continue
        out.append(toks[i])
        i += 1
    return out, False


# ---------------------------------------------------------------- modules


@dataclass
class Module:
    path: tuple[str, ...]
    file: str  # the file that holds the module (for inline modules, its parent's)
    inline: bool
    children: dict[str, tuple[str, ...]] = field(default_factory=dict)
    items: set[str] = field(default_factory=set)
    # name -> (absolute path or None for outside the crate, line)
    bindings: dict[str, tuple[tuple[str, ...] | None, int]] = field(default_factory=dict)
    globs: list[tuple[tuple[str, ...], int]] = field(default_factory=list)
    # (raw path segments, line, is_use): resolved after every file is read
    refs: list[tuple[list[str], int, bool]] = field(default_factory=list)


DEF_WORDS = {"fn", "struct", "enum", "trait", "type", "const", "static", "union"}


class Crate:
    def __init__(self, name: str, root_file: str):
        self.name = name
        self.root_file = root_file
        self.modules: dict[tuple[str, ...], Module] = {}
        self.pending: list[tuple[Module, list[Tok]]] = []
        self.load_file((), root_file, is_mod_rs=True)

    # Reading files ---------------------------------------------------

    def load_file(self, path: tuple[str, ...], file: str, is_mod_rs: bool) -> None:
        try:
            with open(file, encoding="utf-8") as f:
                text = f.read()
        except OSError:
            return
        toks, test_only = drop_test_items(tokenize(strip_source(text)))
        if test_only:
            return
        mod = Module(path, file, inline=False)
        self.modules[path] = mod
        base = os.path.dirname(file)
        child_dir = base if is_mod_rs else os.path.join(base, os.path.splitext(os.path.basename(file))[0])
        self.scan(mod, toks, 0, len(toks), child_dir, base)

    def scan(self, mod: Module, toks: list[Tok], start: int, end: int, child_dir: str, attr_dir: str) -> None:
        """Reads one module body toks[start:end] (a file or an inline block)."""
        depth = 0
        i = start
        path_attr = None
        while i < end:
            t = toks[i].text
            if t == "#":
                a_end = attribute_end(toks, i)
                words = [x.text for x in toks[i:a_end]]
                if len(words) >= 5 and words[2] == "path" and words[3] == "=":
                    path_attr = i  # the literal was blanked; read it from the source
                i = a_end
                continue
            if t in OPEN:
                depth += 1
            elif t in CLOSE:
                depth -= 1
            elif t == "mod" and depth == 0 and i + 2 < end and re.match(r"\w", toks[i + 1].text):
                name = toks[i + 1].text
                child_path = mod.path + (name,)
                mod.children[name] = child_path
                mod.items.add(name)
                if toks[i + 2].text == ";":
                    file = self.child_file(child_dir, attr_dir, name, toks, path_attr, mod)
                    if file and child_path not in self.modules:
                        self.load_file(child_path, file, is_mod_rs=os.path.basename(file) == "mod.rs" or path_attr is not None)
                    i += 3
                    path_attr = None
                    continue
                if toks[i + 2].text == "{":
                    close = match_brace(toks, i + 2)
                    inner = Module(child_path, mod.file, inline=True)
                    self.modules[child_path] = inner
                    self.scan(inner, toks, i + 3, close, os.path.join(child_dir, name), os.path.join(child_dir, name))
                    i = close + 1
                    path_attr = None
                    continue
            elif t == "use" and (i == 0 or toks[i - 1].text not in ("::",)):
                j = i + 1
                while j < end and toks[j].text != ";":
                    j += 1
                for segs, alias, glob in parse_use_tree([x.text for x in toks[i + 1 : j]]):
                    mod.refs.append((segs + (["*"] if glob else []) + ([f"as:{alias}"] if alias else []), toks[i].line, True))
                i = j + 1
                path_attr = None
                continue
            elif depth == 0 and t in DEF_WORDS and i + 1 < end:
                nxt = toks[i + 1].text
                if t == "const" and nxt in ("fn", "unsafe", "async", "extern"):
                    pass
                elif re.match(r"[A-Za-z_]\w*$", nxt) and nxt not in ("fn", "unsafe", "async", "extern"):
                    mod.items.add(nxt)
            elif t == "macro_rules" and i + 2 < end and toks[i + 1].text == "!":
                mod.items.add(toks[i + 2].text)
            elif re.match(r"[A-Za-z_]\w*$", t) and i + 2 < end and toks[i + 1].text == "::" and (
                i == 0 or toks[i - 1].text not in ("::", "$", "in")
            ):
                segs = [t]
                j = i + 1
                while j + 1 < end and toks[j].text == "::" and re.match(r"[A-Za-z_]\w*$", toks[j + 1].text):
                    segs.append(toks[j + 1].text)
                    j += 2
                if toks[i - 1].text != "$" if i > 0 else True:
                    mod.refs.append((segs, toks[i].line, False))
                i = j
                continue
            i += 1
        self.pending.append((mod, []))

    def child_file(self, child_dir, attr_dir, name, toks, path_attr, mod) -> str | None:
        if path_attr is not None:
            line = toks[path_attr].line
            with open(mod.file, encoding="utf-8") as f:
                src = f.read().splitlines()
            m = re.search(r'#\[\s*path\s*=\s*"([^"]+)"', src[line - 1]) if line - 1 < len(src) else None
            if m:
                return os.path.normpath(os.path.join(attr_dir, m.group(1)))
        for cand in (os.path.join(child_dir, name + ".rs"), os.path.join(child_dir, name, "mod.rs")):
            if os.path.exists(cand):
                return cand
        return None

    # Resolving -------------------------------------------------------

    def absolute(self, cur: tuple[str, ...], segs: list[str]) -> tuple[str, ...] | None:
        """The crate-absolute path of `segs` written in module `cur`, or None
        when it leads outside the crate (another crate, std, a generic)."""
        if not segs:
            return None
        head = segs[0]
        if head == "crate":
            return tuple(segs[1:])
        if head == "self":
            return cur + tuple(segs[1:])
        if head == "super":
            base = cur
            k = 0
            while k < len(segs) and segs[k] == "super":
                if not base:
                    return None
                base = base[:-1]
                k += 1
            if k < len(segs) and segs[k] == "self":
                k += 1
            return base + tuple(segs[k:])
        mod = self.modules.get(cur)
        if mod is None:
            return None
        if head in mod.children:
            return mod.children[head] + tuple(segs[1:])
        if head in mod.bindings:
            target, _ = mod.bindings[head]
            return None if target is None else target + tuple(segs[1:])
        if head in mod.items:
            return cur + tuple(segs)
        return None

    def module_prefix(self, path: tuple[str, ...]) -> tuple[str, ...]:
        k = len(path)
        while k > 0 and path[:k] not in self.modules:
            k -= 1
        return path[:k]

    def resolve(self, path: tuple[str, ...], seen: frozenset = frozenset()) -> tuple[tuple[str, ...] | None, bool]:
        """(module that defines what `path` names, whether the item was found
        there) — (None, _) when it comes from outside the crate."""
        if path in seen or len(seen) > 30:
            return self.module_prefix(path), False
        seen = seen | {path}
        m = self.module_prefix(path)
        rest = path[len(m) :]
        if not rest:
            return m, True
        mod = self.modules[m]
        name = rest[0]
        if name in mod.items:
            return m, True
        if name in mod.bindings:
            target, _ = mod.bindings[name]
            if target is None:
                return None, True
            return self.resolve(target + rest[1:], seen)
        for g, _ in mod.globs:
            gm = self.modules.get(self.module_prefix(g))
            if gm is not None and g == gm.path and (name in gm.items or name in gm.bindings):
                return self.resolve(g + rest, seen)
        return m, False

    def file_of(self, path: tuple[str, ...]) -> str:
        m = self.modules[self.module_prefix(path)]
        return m.file

    def build_bindings(self) -> None:
        """Every `use` binds a name (or a glob) in its module."""
        for mod in self.modules.values():
            for segs, line, is_use in mod.refs:
                if not is_use:
                    continue
                segs, alias = split_alias(segs)
                glob = segs[-1:] == ["*"]
                if glob:
                    segs = segs[:-1]
                if not segs:
                    continue
                if segs[-1] == "self":
                    segs = segs[:-1]
                target = self.absolute_for_use(mod.path, segs)
                if glob:
                    if target is not None:
                        mod.globs.append((target, line))
                    continue
                name = alias or segs[-1]
                if name in ("crate", "super", "self", "_"):
                    continue
                mod.bindings[name] = (target, line)

    def absolute_for_use(self, cur, segs):
        # In a `use`, a leading name may also be a child module declared later
        # or an external crate; bindings of other `use`s count as in code.
        if segs and segs[0] not in ("crate", "self", "super"):
            mod = self.modules.get(cur)
            if mod is None or (segs[0] not in mod.children and segs[0] not in mod.items):
                # A relative path through another `use` binding (`use protocol::x`
                # after `use crate::protocol`) is rare; treat it as outside.
                return None
        return self.absolute(cur, segs)

    def edges(self) -> dict[tuple[str, str], tuple[int, str]]:
        self.build_bindings()
        found: dict[tuple[str, str], tuple[int, str]] = {}
        for mod in self.modules.values():
            for segs, line, is_use in mod.refs:
                segs, _alias = split_alias(segs)
                glob = segs[-1:] == ["*"]
                if glob:
                    segs = segs[:-1]
                if segs and segs[-1] == "self":
                    segs = segs[:-1]
                if not segs:
                    continue
                if is_use:
                    target = self.absolute_for_use(mod.path, segs)
                else:
                    if segs[0] not in ("crate", "self", "super") and segs[0] not in mod.children and segs[0] not in mod.bindings:
                        continue
                    target = self.absolute(mod.path, segs)
                if target is None:
                    continue
                if is_use and not glob and target in self.modules:
                    continue  # only brings a module's name into scope
                defining, _ok = self.resolve(target)
                if defining is None:
                    continue
                src, dst = mod.file, self.file_of(defining)
                if src == dst:
                    continue
                key = (src, dst)
                if key not in found:
                    found[key] = (line, "::".join(segs) + ("::*" if glob else ""))
        return found


def split_alias(segs: list[str]) -> tuple[list[str], str | None]:
    if segs and segs[-1].startswith("as:"):
        return segs[:-1], segs[-1][3:]
    return segs, None


def match_brace(toks: list[Tok], i: int) -> int:
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text in OPEN:
            depth += 1
        elif toks[j].text in CLOSE:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def parse_use_tree(words: list[str]) -> list[tuple[list[str], str | None, bool]]:
    """`a::{b, c::d as e, f::*}` -> [(['a','b'],None,False), (['a','c','d'],'e',False), (['a','f'],None,True)]."""
    out: list[tuple[list[str], str | None, bool]] = []

    def tree(i: int, prefix: list[str]) -> int:
        segs = list(prefix)
        while i < len(words):
            w = words[i]
            if w == "::":
                i += 1
            elif w == "{":
                i += 1
                while i < len(words) and words[i] != "}":
                    i = tree(i, segs)
                    if i < len(words) and words[i] == ",":
                        i += 1
                return i + 1
            elif w == "*":
                out.append((segs, None, True))
                return i + 1
            elif w in (",", "}"):
                if segs != prefix:
                    out.append((segs, None, False))
                return i
            elif w == "as":
                alias = words[i + 1] if i + 1 < len(words) else None
                out.append((segs, alias, False))
                return i + 2
            else:
                segs.append(w)
                i += 1
        if segs != prefix:
            out.append((segs, None, False))
        return i

    tree(0, [])
    return out


# ---------------------------------------------------------------- workspace


def crate_roots(root: str) -> list[tuple[str, str]]:
    with open(os.path.join(root, "Cargo.toml"), "rb") as f:
        manifest = tomllib.load(f)
    dirs = []
    if "package" in manifest:
        dirs.append(".")
    for pattern in manifest.get("workspace", {}).get("members", []):
        if pattern.endswith("/*"):
            parent = os.path.join(root, pattern[:-2])
            dirs.extend(os.path.join(pattern[:-2], d) for d in sorted(os.listdir(parent)))
        else:
            dirs.append(pattern)
    roots = []
    for d in dirs:
        src = os.path.join(root, d, "src")
        for name in ("lib.rs", "main.rs"):
            if os.path.exists(os.path.join(src, name)):
                roots.append((f"{os.path.normpath(d)}:{name[:-3]}", os.path.join(src, name)))
        bins = os.path.join(src, "bin")
        if os.path.isdir(bins):
            for b in sorted(os.listdir(bins)):
                p = os.path.join(bins, b)
                if b.endswith(".rs"):
                    roots.append((f"{os.path.normpath(d)}:bin/{b[:-3]}", p))
                elif os.path.exists(os.path.join(p, "main.rs")):
                    roots.append((f"{os.path.normpath(d)}:bin/{b}", os.path.join(p, "main.rs")))
    return roots


def sccs(nodes: list[str], adj: dict[str, list[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        # Iterative Tarjan, to stay clear of Python's recursion limit.
        work = [(v, iter(adj.get(v, [])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(adj.get(w, []))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(comp)

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def shortest_cycles(comp: list[str], adj: dict[str, list[str]]) -> list[list[str]]:
    """For each edge inside the component, the shortest circle through it
    (breadth-first back to its start), each circle once, shortest first."""
    members = set(comp)
    found: dict[frozenset, list[str]] = {}
    for a in sorted(comp):
        for b in adj.get(a, []):
            if b not in members:
                continue
            prev = {b: None}
            queue = [b]
            while queue and a not in prev:
                nxt = []
                for v in queue:
                    for w in adj.get(v, []):
                        if w in members and w not in prev:
                            prev[w] = v
                            nxt.append(w)
                queue = nxt
            if a not in prev:
                continue
            path = [a]
            while path[-1] != b:
                path.append(prev[path[-1]])
            cycle = [a] + list(reversed(path[1:]))
            # the same circle from another start is the same set of edges
            key = frozenset(zip(cycle, cycle[1:] + cycle[:1]))
            found.setdefault(key, cycle)
    return sorted(found.values(), key=lambda c: (len(c), c))


def main(argv: list[str]) -> int:
    show_edges = "--edges" in argv
    args = [a for a in argv if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else ".")
    circles = 0
    for name, root_file in crate_roots(root):
        crate = Crate(name, root_file)
        edges = crate.edges()
        rel = lambda p: os.path.relpath(p, root)  # noqa: E731
        if show_edges:
            for (a, b), (line, path) in sorted(edges.items()):
                print(f"edge {rel(a)}:{line} -> {rel(b)}  ({path})")
        nodes = sorted({m.file for m in crate.modules.values()})
        adj: dict[str, list[str]] = {}
        for a, b in sorted(edges):
            adj.setdefault(a, []).append(b)
        for comp in sccs(nodes, adj):
            if len(comp) < 2:
                continue
            circles += 1
            members = set(comp)
            print(f"circle in crate {name}: " + ", ".join(rel(f) for f in sorted(comp)))
            for (a, b), (line, path) in sorted(edges.items()):
                if a in members and b in members:
                    print(f"  {rel(a)}:{line} -> {rel(b)}  ({path})")
            if len(comp) > 2:
                print("  shortest circles through it:")
                for cycle in shortest_cycles(comp, adj):
                    print("    " + " -> ".join(rel(f) for f in cycle + [cycle[0]]))
    if circles:
        print(f"{circles} module circle(s) found")
        return 1
    print("no module circles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
