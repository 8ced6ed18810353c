#!/usr/bin/env bash
# test.sh: install what is missing, build, and run the whole test suite.
#   scripts/test.sh              the suite in build/
#   scripts/test.sh --sanitize   the suite under ASan + UBSan in build-asan/
# Extra arguments go to `meson test` (e.g. --suite lanes). Ends with a line
# "N passed, N failed" counting every Criterion test on its own.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh

dir=build
opts=()
if [ "${1:-}" = "--sanitize" ]; then
    shift
    dir=build-asan
    opts=(-Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug)
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi

emq_install_deps "${EMQ_PACKAGES[@]}" "${EMQ_TEST_PACKAGES[@]}"
emq_build "$dir" "${opts[@]}"
rc=0
meson test -C "$dir" --print-errorlogs --num-processes 2 "$@" || rc=$?
python3 scripts/tally.py "$dir/meson-logs/testlog.json" || rc=1
exit $rc
