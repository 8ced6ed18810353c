#!/usr/bin/env python3
"""Embed the lane scripts into C.

Usage:
  embed_lua.py OUT.c OUT.h lib.lua script.lua...   write the script table
  embed_lua.py --lint lib.lua script.lua...        run luacheck on each
                                                    script as it is shipped

Each shipped script is lib.lua (the shared prelude) followed by the script
itself. The table holds {name, source, length, sha1}; the daemon sends
EVALSHA with the digest and loads the source on NOSCRIPT, so nothing is read
from disk at run time. An enum SCRIPT_<NAME> indexes the table, generated from
the same list so the two cannot drift apart.

Only the part of the prelude a script uses is shipped with it (prelude()
below): Redis runs a script's whole chunk on every call, and each local
function the prelude defines is a closure built per call whether or not
the script calls it. With all of lib.lua, building them cost Redis about
as much as the rest of a small call (callgrind: an EVALSHA of "return 1"
~24k instructions, with the whole prelude in front ~69k). The prelude is
split into its top-level definitions (each starts at column 0 with
"local"), and a script gets those it names, and those they name, in
lib.lua's order. luacheck runs on the shipped text, so a definition left
out that a script needs fails the lint.

A script whose header has the line "-- flags: allow-oom" is shipped with
the Redis 7 shebang "#!lua flags=allow-oom" first, so that Redis runs it
while it is out of memory (maxmemory reached, noeviction). Those are the
moves that take, settle, move or delete what exists (claim, complete, fail,
release, extend, reap, promote, drain, dead, the levers): each adds at most
a few bytes per job, and consumers must be able to drain the backlog that
would free the memory. enqueue, which adds jobs, has no flag: Redis
refuses it then, and emqd answers EFULL.

A script whose header has the line "-- flags: no-writes" only reads: it is
shipped with "#!lua flags=no-writes" (Redis then refuses any write it would
make, so the flag cannot be wrong without a test failing) and its table row
has .writes = false. The pool follows only calls that may write with
replica-acks' WAIT: a read has nothing for a replica to confirm.
"""
import hashlib
import os
import re
import subprocess
import sys


FLAG_OOM = "-- flags: allow-oom"
FLAG_READ = "-- flags: no-writes"


def has_flag(body, flag):
    return any(ln.startswith(flag) for ln in body.splitlines()[:12])


def reads_only(path):
    with open(path, encoding="utf-8") as f:
        return has_flag(f.read(), FLAG_READ)


IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DEFINES = re.compile(r"^local (?:function ([A-Za-z_][A-Za-z0-9_]*)|([A-Za-z_][A-Za-z0-9_, ]*))")


def names_used(text):
    """The identifiers of Lua text, comments left out (strings are not:
    a name in a string only brings in a definition that is not needed)."""
    code = "\n".join(ln.split("--", 1)[0] for ln in text.splitlines())
    return set(IDENT.findall(code))


def prelude(lib_text, body):
    """lib_text cut to the definitions body uses, directly or through
    other definitions. Everything up to the line '-- luacheck: push' (the
    header comment) and from '-- luacheck: pop' on is kept whole; between
    them, a column-0 comment goes with the definition after it, and an
    indented line or an 'end' with the definition before it."""
    lines = lib_text.splitlines(keepends=True)
    starts = [i for i, ln in enumerate(lines) if ln.startswith("-- luacheck: push")]
    ends = [i for i, ln in enumerate(lines) if ln.startswith("-- luacheck: pop")]
    if not starts or not ends:
        return lib_text
    head, tail = lines[: starts[0] + 1], lines[ends[-1]:]
    blocks, comments = [], []
    for ln in lines[starts[0] + 1 : ends[-1]]:
        m = DEFINES.match(ln)
        if m:
            names = [m.group(1)] if m.group(1) else [n.strip() for n in m.group(2).split(",")]
            blocks.append({"names": set(names), "lines": comments + [ln]})
            comments = []
        elif ln.startswith("--") or ln.strip() == "":
            comments.append(ln)
        elif blocks:
            blocks[-1]["lines"].extend(comments + [ln])
            comments = []
        else:
            head.extend(comments + [ln])
            comments = []
    defined = {}
    for blk in blocks:
        blk["uses"] = names_used("".join(blk["lines"]))
        for n in blk["names"]:
            defined[n] = blk
    want, todo = set(), [n for n in names_used(body) if n in defined]
    while todo:
        blk = defined[todo.pop()]
        if id(blk) in want:
            continue
        want.add(id(blk))
        todo.extend(n for n in blk["uses"] if n in defined)
    kept = [ln for blk in blocks if id(blk) in want for ln in blk["lines"]]
    return "".join(head + kept + comments + tail)


def shipped(lib, path, shebang=True):
    with open(lib, encoding="utf-8") as f:
        lib_text = f.read()
    with open(path, encoding="utf-8") as f:
        body = f.read()
    prelude_text = prelude(lib_text, body)
    head = ""
    if shebang and has_flag(body, FLAG_OOM):
        head = "#!lua flags=allow-oom\n"
    elif shebang and has_flag(body, FLAG_READ):
        # no-writes implies allow-oom in Redis 7: a read runs out of memory.
        head = "#!lua flags=no-writes\n"
    return head + prelude_text + "\n" + body


def c_string(text):
    out = []
    for line in text.splitlines(keepends=True):
        esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        out.append('    "%s"' % esc)
    return "\n".join(out) if out else '    ""'


def name_of(path):
    return os.path.splitext(os.path.basename(path))[0]


def write_table(out_c, out_h, lib, scripts):
    scripts = sorted(scripts, key=name_of)
    names = [name_of(p) for p in scripts]
    with open(out_h, "w", encoding="utf-8") as h:
        h.write("/* Generated by scripts/embed_lua.py from the lua/ scripts: do not edit. */\n")
        h.write("#ifndef EMQ_LUA_SCRIPTS_H\n#define EMQ_LUA_SCRIPTS_H\n\n")
        h.write("#include <stddef.h>\n\n")
        h.write("/* One embedded lane script: the prelude plus its body. */\n")
        h.write("struct script {\n    const char *name;\n    const char *source;\n")
        h.write("    size_t length;\n    const char *sha1; /* 40 hex digits */\n")
        h.write("    _Bool writes; /* false: shipped as no-writes, never followed by WAIT */\n")
        h.write("};\n\n")
        h.write("enum script_id {\n")
        for n in names:
            h.write("    SCRIPT_%s,\n" % n.upper())
        h.write("    SCRIPT__COUNT\n};\n\n")
        h.write("extern const struct script script_table[SCRIPT__COUNT];\n\n#endif\n")
    with open(out_c, "w", encoding="utf-8") as c:
        c.write("/* Generated by scripts/embed_lua.py from the lua/ scripts: do not edit. */\n")
        c.write('#include "lua_scripts.h"\n\n')
        c.write("const struct script script_table[SCRIPT__COUNT] = {\n")
        for n, p in zip(names, scripts):
            src = shipped(lib, p)
            raw = src.encode("utf-8")
            c.write("    [SCRIPT_%s] = {\n" % n.upper())
            c.write('        .name = "%s",\n' % n)
            c.write("        .source =\n%s,\n" % c_string(src))
            c.write("        .length = %d,\n" % len(raw))
            c.write('        .sha1 = "%s",\n' % hashlib.sha1(raw).hexdigest())
            c.write("        .writes = %d,\n" % (0 if reads_only(p) else 1))
            c.write("    },\n")
        c.write("};\n")


def lint(lib, scripts):
    failed = 0
    for p in scripts:
        r = subprocess.run(
            ["luacheck", "--std", "lua51", "--globals", "redis", "KEYS", "ARGV",
             "--codes", "--formatter", "plain", "--filename", p, "-"],
            input=shipped(lib, p, shebang=False).encode("utf-8"))
        failed += r.returncode != 0
    print("luacheck: %d scripts, %d with problems" % (len(scripts), failed))
    return 1 if failed else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "--lint":
        return lint(argv[2], argv[3:])
    if len(argv) < 5:
        sys.stderr.write(__doc__)
        return 2
    write_table(argv[1], argv[2], argv[3], argv[4:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
