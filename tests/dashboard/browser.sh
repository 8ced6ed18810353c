#!/bin/sh
# The dashboard in a real browser (suite dashboard): Debian's chromium,
# driven headless by playwright-core from npm, installed (once) into a
# cache directory under the build directory, as tests/bench/compare
# installs BullMQ. Nothing is fetched at build time; this test needs the
# npm registry the first time it runs.
#
#   browser.sh CACHE_DIR OUT_DIR TEST.mjs
#
# Skips (TAP "1..0 # SKIP reason", so Meson counts it skipped) only when
# no chromium can be found (scripts/deps.sh installs it) or playwright-core
# cannot be installed.
set -eu
cache=$1 out=$2 test=$3
PLAYWRIGHT_VERSION=1.65.1

chromium=${CHROMIUM:-}
for c in chromium chromium-browser; do
    [ -n "$chromium" ] && break
    chromium=$(command -v "$c" 2>/dev/null || true)
done
if [ -z "$chromium" ]; then
    echo "1..0 # SKIP no chromium (Debian: apt-get install chromium; scripts/deps.sh installs it)"
    exit 0
fi
if [ ! -f "$cache/node_modules/playwright-core/package.json" ] ||
    ! grep -q "\"version\": \"$PLAYWRIGHT_VERSION\"" "$cache/node_modules/playwright-core/package.json"; then
    mkdir -p "$cache"
    echo "dashboard: npm install playwright-core@$PLAYWRIGHT_VERSION into $cache" >&2
    if ! npm install --prefix "$cache" --no-audit --no-fund --silent --no-save \
        "playwright-core@$PLAYWRIGHT_VERSION" >&2; then
        echo "1..0 # SKIP playwright-core could not be installed from npm"
        exit 0
    fi
fi
mkdir -p "$out"
export CHROMIUM="$chromium" PLAYWRIGHT_DIR="$cache" SCREENSHOT_DIR="$out"
exec node --test --test-reporter=tap "$test"
