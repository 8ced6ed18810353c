#!/usr/bin/env python3
"""Check the file references of the design documents against the tree.

    scripts/check_docs.py [SOURCE_ROOT]

Every inline code span of docs/ARCHITECTURE.md and README.md that is, as a
whole, a file reference is checked:

  `path/to/file.ext`            the file exists (relative to the source root)
  `file.ext`, `dir/file.ext`    a partial path: resolved by searching the
                                tree for files ending so; it must name
                                exactly one (else: ambiguous, with the
                                candidates)
  `path/test_*.c`               a glob: it must match at least one file
  `file.ext:name`               as above, and name is defined or declared
  `file.ext:struct name`        in that file (a function, a #define, a
  `file.ext:enum name`          struct/enum/union, a table; for Lua a
                                function)

Spans that hold anything else (commands, keys, `x.y` fields, addresses,
absolute paths) are not references and are skipped, as are fenced code
blocks. Relative markdown link targets, [text](path), must exist too.
Files generated at build time (the Lua script table, libemq.pc, a file
configured from NAME.in) count as present.

Prints each broken reference as FILE:LINE: message and exits 1; else
prints how many references it checked and exits 0.
"""

import fnmatch
import os
import re
import subprocess
import sys

DOCS = ["docs/ARCHITECTURE.md", "README.md"]

# Extensions that make a span a file reference.
EXTS = {"c", "h", "lua", "py", "sh", "md", "build", "txt", "conf", "in",
        "js", "1", "8", "pc", "service", "json"}

# Made at build time, so never in the source tree.
GENERATED = {"lua_scripts.c", "lua_scripts.h", "web_assets.c", "web_assets.h", "libemq.pc"}

COMPONENT = r"[A-Za-z_.*][A-Za-z0-9_.*+\-]*"
REF = re.compile(
    r"^(?P<path>(?:" + COMPONENT + r"/)*" + COMPONENT + r")"
    r"(?::(?P<name>(?:(?:struct|enum|union)\s+)?[A-Za-z_][A-Za-z0-9_]*)(?:\(\))?)?$")
SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def tree_files(root):
    """Every file of the source tree, as paths relative to root."""
    try:
        # Tracked and new (not ignored) files, as they are in the work tree.
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True,
                             check=True).stdout.decode()
        files = sorted({f for f in out.split("\0")
                        if f and os.path.isfile(os.path.join(root, f))})
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, subdirs, names in os.walk(root):
        # Skip hidden directories and build directories.
        subdirs[:] = [s for s in subdirs if not s.startswith(".")
                      and not os.path.exists(os.path.join(d, s, "meson-private"))]
        for n in names:
            files.append(os.path.relpath(os.path.join(d, n), root))
    return files


def blank_fences(text):
    """The text with fenced code blocks emptied (line numbers kept)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def is_ref(path):
    base = path.rsplit("/", 1)[-1]
    if "." not in base.strip("."):
        return False
    return base.rsplit(".", 1)[1] in EXTS


def resolve(path, files, fileset):
    """(matches, generated): the tree files path names."""
    base = path.rsplit("/", 1)[-1]
    if base in GENERATED:
        return [], True
    if "*" in path:
        pat = path if "/" in path else "*/" + path
        hits = [f for f in files if fnmatch.fnmatch(f, path) or fnmatch.fnmatch(f, pat)]
        return hits, False
    if path in fileset:
        return [path], False
    if path + ".in" in fileset:
        return [], True
    hits = [f for f in files if f.endswith("/" + path)]
    if not hits:
        hits = [f[:-3] for f in files if f.endswith("/" + path + ".in")]
        if len(hits) == 1:
            return [], True
    return hits, False


def defines(text, path, name):
    """Whether name is defined or declared in a file's text."""
    kind, _, ident = name.rpartition(" ")
    ident = ident or name
    e = re.escape(ident)
    if kind:
        return re.search(r"\b" + kind + r"\s+" + e + r"\b", text) is not None
    if path.endswith(".lua"):
        return re.search(r"\bfunction\s+(?:[\w.]+[.:])?" + e + r"\s*\(|\b" + e +
                         r"\s*=\s*function\b", text) is not None
    if path.endswith((".c", ".h")):
        pats = [
            # a function or table at file scope: its line is not indented
            r"^[A-Za-z_].*\b" + e + r"\s*(\(|\[|=)",
            r"^\s*#\s*define\s+" + e + r"\b",
            r"\b(struct|enum|union)\s+" + e + r"\s*\{",
            r"^\s*" + e + r"\s*[,=]",               # an enumerator
            r"\(\s*\*\s*" + e + r"\s*\)\s*\(",      # a function pointer member
            r"\btypedef\b.*\b" + e + r"\s*[;(]",
        ]
        return any(re.search(p, text, re.M) for p in pats)
    return re.search(r"\b" + e + r"\b", text) is not None


def check(root):
    files = tree_files(root)
    fileset = set(files)
    errors, checked = [], 0
    for doc in DOCS:
        full = os.path.join(root, doc)
        with open(full, encoding="utf-8") as f:
            text = blank_fences(f.read())

        def where(pos):
            return "%s:%d" % (doc, text.count("\n", 0, pos) + 1)

        for m in SPAN.finditer(text):
            span = " ".join(m.group(1).split())
            r = REF.match(span)
            if r is None or not is_ref(r.group("path")):
                continue
            path, name = r.group("path"), r.group("name")
            checked += 1
            hits, generated = resolve(path, files, fileset)
            if generated:
                continue
            if not hits:
                errors.append("%s: `%s`: no such file" % (where(m.start()), span))
                continue
            if "*" in path:
                continue
            if len(hits) > 1:
                errors.append("%s: `%s`: ambiguous, could be %s" %
                              (where(m.start()), span, ", ".join(sorted(hits))))
                continue
            if name:
                with open(os.path.join(root, hits[0]), encoding="utf-8",
                          errors="replace") as f:
                    body = f.read()
                if not defines(body, hits[0], name):
                    errors.append("%s: `%s`: %s not defined or declared in %s" %
                                  (where(m.start()), span, name, hits[0]))

        for m in LINK.finditer(text):
            target = m.group(1).split("#", 1)[0]
            if not target or re.match(r"^[a-z]+:", target):
                continue
            checked += 1
            rel = os.path.normpath(os.path.join(os.path.dirname(doc), target))
            if not os.path.exists(os.path.join(root, rel)):
                errors.append("%s: link (%s): no such file" % (where(m.start()), target))
    return errors, checked


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    errors, checked = check(os.path.abspath(root))
    for e in errors:
        print(e)
    if errors:
        print("%d broken reference(s) of %d" % (len(errors), checked))
        return 1
    print("%d references checked in %s: all resolve" % (checked, ", ".join(DOCS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
