#!/bin/sh
# install-config.sh CONFDIR: run by `meson install` after the files are in
# place. Copies emqd.conf.example to emqd.conf in CONFDIR (under DESTDIR)
# only if no emqd.conf is there yet, so an operator's edits survive an
# upgrade; says which it did.
set -eu
dir="${DESTDIR:-}$1"
if [ -e "$dir/emqd.conf" ]; then
    echo "echomq: keeping $1/emqd.conf; the new defaults are in $1/emqd.conf.example"
else
    cp "$dir/emqd.conf.example" "$dir/emqd.conf"
    chmod 0644 "$dir/emqd.conf"
    echo "echomq: installed $1/emqd.conf"
fi
