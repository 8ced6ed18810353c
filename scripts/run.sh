#!/usr/bin/env bash
# run.sh: install what is missing, build, and run emqd in the foreground on
# its embedded default Redis (a supervised redis-server child on a private
# unix socket under the data directory, AOF on). Arguments go to emqd, e.g.
#   scripts/run.sh --listen 127.0.0.1:7711 --data-dir /var/tmp/emqd
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh

echo "echomq: checking the Debian packages the build needs" >&2
emq_install_deps
# ninja's progress ([n/N] lines) goes to stderr, so a first build shows
# what it is doing and stdout is emqd's alone.
emq_build build >&2
echo "echomq: starting emqd (Ctrl-C stops it)" >&2
exec build/daemon/emqd "$@"
