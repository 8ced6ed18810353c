#!/usr/bin/env bash
# run.sh: install what is missing, build, and run emqd in the foreground on
# its embedded default Redis (a supervised redis-server child on a private
# unix socket under the data directory, AOF on). Arguments go to emqd, e.g.
#   scripts/run.sh --listen 127.0.0.1:7711 --data-dir /var/tmp/emqd
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh

emq_install_deps
emq_build build >/dev/null
exec build/daemon/emqd "$@"
