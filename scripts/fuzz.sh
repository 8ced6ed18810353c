#!/usr/bin/env bash
# fuzz.sh: build the libFuzzer targets (clang, ASan + UBSan) in build-fuzz/
# and run each for SECONDS (default 30) from its seed corpus.
#   scripts/fuzz.sh          30 s per target
#   scripts/fuzz.sh 3600     an hour per target (the longer run)
# New inputs go to build-fuzz/corpus/<target>/ (the seeds in tests/fuzz/corpus
# are never written); a crash leaves its input in build-fuzz/artifacts/ and
# fails the run. Ends with "N passed, N failed", one test per target.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh

secs=${1:-30}
dir=build-fuzz
emq_install_deps "${EMQ_FUZZ_PACKAGES[@]}"
if [ ! -f "$dir/build.ninja" ]; then
    CC=clang meson setup "$dir" -Dfuzz=true -Dtests=false \
        -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug >/dev/null
fi
ninja -C "$dir" tests/fuzz/fuzz_frame tests/fuzz/fuzz_request tests/fuzz/fuzz_payload \
    tests/fuzz/fuzz_tokens

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
passed=0 failed=0
for t in fuzz_frame fuzz_request fuzz_payload fuzz_tokens; do
    mkdir -p "$dir/corpus/$t" "$dir/artifacts"
    log="$dir/$t.log"
    if "$dir/tests/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$dir/artifacts/$t-" "$dir/corpus/$t" "tests/fuzz/corpus/$t" \
        >"$log" 2>&1; then
        echo "ok   $t: $(grep -E '^Done [0-9]+ runs' "$log" || echo 'done')"
        passed=$((passed + 1))
    else
        echo "FAIL $t: see $log and $dir/artifacts/"
        grep -E 'ERROR|SUMMARY|runtime error' "$log" | head -n 5 || true
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
