#!/usr/bin/env python3
"""Count test results from Meson's testlog.json and print "N passed, N failed".

Criterion runs under Meson as TAP, so each Criterion test is one "ok" /
"not ok" line in its binary's output; other tests count once by result. A
binary that failed without reporting a failing test (a crash, a timeout)
counts as one failure more, so nothing is hidden. Exit status 1 when
anything failed or nothing ran at all.
"""
import json
import re
import sys


def main(path):
    passed = failed = skipped = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)
            out = t.get("stdout") or ""
            ok = t.get("result") in ("OK", "EXPECTEDFAIL")
            if t.get("result") == "SKIP":
                skipped += 1
                continue
            lines = [l for l in out.splitlines() if re.match(r"^(not )?ok\b", l)]
            if not lines:
                passed += ok
                failed += not ok
                continue
            bad = 0
            for l in lines:
                if l.startswith("not ok"):
                    bad += 1
                elif "# SKIP" in l:
                    skipped += 1
                else:
                    passed += 1
            failed += bad
            if not ok and bad == 0:
                failed += 1
    tail = ", %d skipped" % skipped if skipped else ""
    print("%d passed, %d failed%s" % (passed, failed, tail))
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/meson-logs/testlog.json"))
