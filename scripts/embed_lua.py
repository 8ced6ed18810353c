#!/usr/bin/env python3
"""Build the lane scripts into one Redis Functions library, embedded in C.

Usage:
  embed_lua.py OUT.c OUT.h lib.lua script.lua...   write the library and its table
  embed_lua.py --lint lib.lua script.lua...        run luacheck on the library
                                                    and on each fallback script
  embed_lua.py --library lib.lua script.lua...     print the library (for
                                                    tools outside C: the benches)

The library is lib.lua once, then each script as one function:

    #!lua name=emq_<v>
    <lib.lua>
    redis.register_function{function_name = 'emq_<v>_claim', flags = {...},
      callback = function(_, ARGV)
    begin(ARGV)
    <claim.lua>
    end}
    ...

where <v> is the first 12 hex digits of the SHA-1 of everything after the
first line. The daemon loads it with FUNCTION LOAD when a connection is set
up and again after "Function not found" (a FUNCTION FLUSH, a Redis without
persistence restarted), and calls a script with FCALL emq_<v>_<name>.
Nothing is read from disk at run time. An enum SCRIPT_<NAME> indexes the
table, generated from the same list so the two cannot drift apart.

Why Functions and not EVALSHA: Redis runs an EVAL script's whole chunk on
every call, and each local function of the prelude is a closure built per
call (its upvalues looked up in Lua's list of open ones): 42-46k
instructions a call before the script's own first line, about a third of
a one-job enqueue (tests/bench/RESULTS.md). A library's chunk runs once,
at load; a call runs only its function, begin() (lib.lua: the call's key
names and memos) and the script's own body.

Each script is also embedded as an EVAL script of its own (.source,
.sha1: the part of lib.lua it uses, then begin(ARGV) and its body, under
a shebang of its flags): the fallback for a connection whose Redis will
not load the library. Redis at maxmemory refuses FUNCTION LOAD (a command
that may add memory) though it runs EVAL scripts flagged allow-oom, so a
daemon of a new build started while Redis is full would otherwise have
no scripts at all, not even the ones that drain the backlog; an ACL may
also allow EVALSHA and not FUNCTION. The pool (pool.c) runs a script by
EVALSHA, after a SCRIPT LOAD of them all, for as long as its connection
has no library, and tries to load the library again now and then.

The version in the names lets daemons of two releases share one Redis
during an upgrade, each calling its own library; a library no daemon calls
any more stays until deleted (README.md, "Upgrade").

A script whose header has the line "-- flags: allow-oom" is registered
with the flag allow-oom, so that Redis runs it while it is out of memory
(maxmemory reached, noeviction). Those are the moves that take, settle,
move or delete what exists (claim, complete, fail, release, extend, reap,
promote, drain, dead, the levers): each adds at most a few bytes per job,
and consumers must be able to drain the backlog that would free the
memory. enqueue, which adds jobs, has no flag: Redis refuses it then, and
emqd answers EFULL.

A script whose header has the line "-- flags: no-writes" only reads: it is
registered with the flag no-writes (Redis then refuses any write it would
make, so the flag cannot be wrong without a test failing) and its table row
has .writes = false. The pool follows only calls that may write with
replica-acks' WAIT: a read has nothing for a replica to confirm.

A function's flags also hold it to its declared keys on a Redis Cluster:
every key it touches must be in the slot of the keys it declares (emqd
declares the queue's fixed keys there, pool.c), where a script without
flags could touch any key the node serves.
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


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def name_of(path):
    return os.path.splitext(os.path.basename(path))[0]


def flags_of(body):
    if has_flag(body, FLAG_OOM):
        return ["allow-oom"]
    if has_flag(body, FLAG_READ):
        # no-writes implies allow-oom in Redis 7: a read runs out of memory.
        return ["no-writes"]
    return []


def library(lib, scripts):
    """(text, library name, [(script name, function name, writes)]) for
    lib.lua and the scripts, sorted by name."""
    scripts = sorted(scripts, key=name_of)
    parts, rows = [read(lib).rstrip("\n") + "\n"], []
    for p in scripts:
        body = read(p)
        flags = ", ".join("'%s'" % f for f in flags_of(body))
        parts.append(
            "\n-- %s.lua\n"
            "redis.register_function{function_name = '@LIB@_%s', flags = {%s},\n"
            "  callback = function(_, ARGV)\n"
            "begin(ARGV)\n%s\nend}\n" % (name_of(p), name_of(p), flags, body.rstrip("\n")))
    text = "".join(parts)
    version = hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]
    libname = "emq_" + version
    for p in scripts:
        rows.append((name_of(p), "%s_%s" % (libname, name_of(p)), not has_flag(read(p), FLAG_READ)))
    return "#!lua name=%s\n%s" % (libname, text.replace("@LIB@", libname)), libname, rows


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
    """Script path as an EVAL script of its own, the fallback form: the
    part of lib.lua it uses, then begin(ARGV) and its body, under the
    shebang of its flags (none without flags: Redis then runs it as a
    script of Redis 6, which may start out of memory and is refused its
    first write)."""
    lib_text, own = read(lib), read(path)
    body = "begin(ARGV)\n" + own
    head = ""
    if shebang and has_flag(own, FLAG_OOM):
        head = "#!lua flags=allow-oom\n"
    elif shebang and has_flag(own, FLAG_READ):
        head = "#!lua flags=no-writes\n"
    return head + prelude(lib_text, body) + "\n" + body


def c_string(text):
    out = []
    for line in text.splitlines(keepends=True):
        esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        out.append('    "%s"' % esc)
    return "\n".join(out) if out else '    ""'


def write_table(out_c, out_h, lib, scripts):
    text, libname, rows = library(lib, scripts)
    paths = {name_of(p): p for p in scripts}
    with open(out_h, "w", encoding="utf-8") as h:
        h.write("/* Generated by scripts/embed_lua.py from the lua/ scripts: do not edit. */\n")
        h.write("#ifndef EMQ_LUA_SCRIPTS_H\n#define EMQ_LUA_SCRIPTS_H\n\n")
        h.write("#include <stddef.h>\n\n")
        h.write("/* The Redis Functions library of every lane script (FUNCTION LOAD). */\n")
        h.write("extern const char lua_library[];\n")
        h.write("extern const size_t lua_library_len;\n")
        h.write("extern const char lua_library_name[]; /* emq_<12 hex digits> */\n\n")
        h.write("/* One lane script: a function of the library. */\n")
        h.write("struct script {\n    const char *name;\n")
        h.write("    const char *function; /* FCALL's name: <library>_<name> */\n")
        h.write("    size_t function_len;\n")
        h.write("    /* The fallback (pool.c): the script as an EVAL script of its own. */\n")
        h.write("    const char *source;\n    size_t length;\n")
        h.write("    const char *sha1; /* 40 hex digits */\n")
        h.write("    _Bool writes; /* false: registered no-writes, never followed by WAIT */\n")
        h.write("};\n\n")
        h.write("enum script_id {\n")
        for n, _, _ in rows:
            h.write("    SCRIPT_%s,\n" % n.upper())
        h.write("    SCRIPT__COUNT\n};\n\n")
        h.write("extern const struct script script_table[SCRIPT__COUNT];\n\n#endif\n")
    with open(out_c, "w", encoding="utf-8") as c:
        c.write("/* Generated by scripts/embed_lua.py from the lua/ scripts: do not edit. */\n")
        c.write('#include "lua_scripts.h"\n\n')
        c.write("const char lua_library[] =\n%s;\n" % c_string(text))
        c.write("const size_t lua_library_len = %d;\n" % len(text.encode("utf-8")))
        c.write('const char lua_library_name[] = "%s";\n\n' % libname)
        c.write("const struct script script_table[SCRIPT__COUNT] = {\n")
        for n, fn, writes in rows:
            c.write("    [SCRIPT_%s] = {\n" % n.upper())
            c.write('        .name = "%s",\n' % n)
            c.write('        .function = "%s",\n' % fn)
            c.write("        .function_len = %d,\n" % len(fn))
            src = shipped(lib, paths[n])
            c.write("        .source =\n%s,\n" % c_string(src))
            c.write("        .length = %d,\n" % len(src.encode("utf-8")))
            c.write('        .sha1 = "%s",\n' % hashlib.sha1(src.encode("utf-8")).hexdigest())
            c.write("        .writes = %d,\n" % (1 if writes else 0))
            c.write("    },\n")
        c.write("};\n")


def luacheck(name, text, globals_):
    r = subprocess.run(
        ["luacheck", "--std", "lua51", "--globals"] + globals_ +
        ["--codes", "--formatter", "plain", "--filename", name, "-"],
        input=text.encode("utf-8"))
    return r.returncode != 0


def lint(lib, scripts):
    """luacheck on the library as loaded and on each script's fallback
    form, where a definition of lib.lua left out that the script needs
    would show."""
    text, _, _ = library(lib, scripts)
    # The first line is the library's header, not Lua: luacheck sees an
    # empty line in its place, so its line numbers are the library's.
    failed = luacheck("library.lua", "\n" + text.split("\n", 1)[1], ["redis"])
    for p in scripts:
        failed += luacheck(p, shipped(lib, p, shebang=False), ["redis", "KEYS", "ARGV"])
    print("luacheck: the library and %d fallback scripts, %d with problems" %
          (len(scripts), failed))
    return 1 if failed else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "--lint":
        return lint(argv[2], argv[3:])
    if len(argv) >= 3 and argv[1] == "--library":
        sys.stdout.write(library(argv[2], argv[3:])[0])
        return 0
    if len(argv) < 5:
        sys.stderr.write(__doc__)
        return 2
    write_table(argv[1], argv[2], argv[3], argv[4:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
