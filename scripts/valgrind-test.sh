#!/usr/bin/env bash
# valgrind-test.sh: the exe_wrapper of the 'valgrind' Meson test setup.
#   meson test -C build --setup valgrind --suite proto
# Criterion runs each test in a re-executed worker process, so valgrind
# must trace children (redis-server and emqd, started by integration tests,
# are left out); it writes one log per process, and this wrapper fails the
# run when any log holds an error or a definite leak, whatever the test
# binary's own exit status (Criterion does not see the worker's).
set -uo pipefail
logs=$(mktemp -d /tmp/emq-valgrind-XXXXXX)
valgrind --quiet --trace-children=yes \
    --trace-children-skip='*/redis-server,*/emqd,*/sh,*/bash' \
    --leak-check=full --errors-for-leak-kinds=definite \
    --log-file="$logs/vg.%p" "$@"
rc=$?
if grep -lE '(Invalid|uninitialised|definitely lost|Mismatched|overlap|Syscall param)' \
    "$logs"/vg.* >/dev/null 2>&1; then
    echo "# valgrind found errors:" >&2
    cat "$logs"/vg.* >&2
    rc=1
fi
rm -rf "$logs"
exit $rc
