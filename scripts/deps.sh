# deps.sh: sourced by run.sh and test.sh. Installs, with apt-get, whatever
# Debian 12 packages the build and the tests need and are missing.
# shellcheck shell=bash

EMQ_PACKAGES=(
    build-essential pkg-config meson ninja-build python3
    libuv1-dev libhiredis-dev libjansson-dev libcriterion-dev libssl-dev openssl
    redis-server lua-check groff-base
    libsystemd-dev libhttp-parser-dev prometheus systemd libssl-dev
    python3-pytest python3-pip python3-setuptools python3-wheel
)
# The Node.js client's tests (client/node) need node 18+; Debian 12's
# nodejs is 18. A node already on PATH (e.g. a newer one) is used as it is.
command -v node >/dev/null 2>&1 || EMQ_PACKAGES+=(nodejs)
# Only for the tests (scripts/test.sh installs them, scripts/run.sh does
# not): the dashboard's browser test (suite dashboard, tests/dashboard)
# needs Debian's chromium, driven by playwright-core, which the test
# installs from npm into the build directory (so npm too).
EMQ_TEST_PACKAGES=(chromium)
command -v npm >/dev/null 2>&1 || EMQ_TEST_PACKAGES+=(npm)

# For scripts/fuzz.sh: clang and its libFuzzer runtime.
EMQ_FUZZ_PACKAGES=(clang libclang-rt-14-dev)

# Install the packages named (default: EMQ_PACKAGES) that are missing.
emq_install_deps() {
    local missing=()
    local want=("$@")
    [ ${#want[@]} -gt 0 ] || want=("${EMQ_PACKAGES[@]}")
    for p in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "echomq: installing ${missing[*]} (apt-get)" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null
}

# Configure (or reconfigure) a build directory and build it. Each step
# says what it does on stderr, so a first build (tens of seconds) is not a
# silent wait; ninja's own progress follows.
emq_build() {
    local dir=$1
    shift
    if [ -f "$dir/build.ninja" ]; then
        meson configure "$dir" "$@" >/dev/null
    else
        echo "echomq: configuring $dir (meson setup)" >&2
        meson setup "$dir" "$@" >/dev/null
    fi
    echo "echomq: building $dir (ninja)" >&2
    ninja -C "$dir"
}
