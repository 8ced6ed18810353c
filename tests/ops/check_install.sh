#!/bin/sh
# check_install.sh BUILD_DIR: `meson install --destdir` puts emqd, emqctl,
# emq-worker, the man pages, the config (and its example) and the unit
# where they belong; a second install (an upgrade) keeps an edited config and
# refreshes only the example.
set -u
build=$1
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$dest.log" 2>&1 ||
    { cat "$dest.log"; rm -f "$dest.log"; exit 1; }
rm -f "$dest.log"
prefix=$(meson introspect "$build" --buildoptions |
         python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
fail=0
for pattern in "$prefix/sbin/emqd" "$prefix/bin/emqctl" "$prefix/share/man/man8/emqd.8" \
               "$prefix/share/man/man1/emqctl.1" "$prefix/bin/emq-worker" \
               "$prefix/share/man/man1/emq-worker.1" "*/etc/emqd/emqd.conf" \
               "*/etc/emqd/emqd.conf.example" \
               "*/systemd/system/emqd.service"; do
    found=$(cd "$dest" && find . -path ".$pattern" -o -path "./$pattern" | head -1)
    if [ -z "$found" ]; then
        echo "missing: $pattern"
        fail=1
    else
        echo "installed: ${found#.}"
    fi
done
# libemq's header compiles from where it was installed alone: emq.h
# includes the error table installed beside it (emq_errors.def).
inc=$(find "$dest" -name emq.h -path "*/include/*" | head -1)
if [ -z "$inc" ] || [ ! -f "$(dirname "$inc")/emq_errors.def" ]; then
    echo "missing: include/emq.h with emq_errors.def beside it"
    fail=1
elif printf '#include <emq.h>\nint main(void) { return EMQ_EFULL > EMQ_EPROTO ? 0 : 1; }\n' |
        ${CC:-cc} -x c -fsyntax-only -I"$(dirname "$inc")" $(pkg-config --cflags jansson) - ; then
    echo "installed: ${inc#$dest} compiles on its own"
else
    echo "the installed emq.h does not compile on its own"
    fail=1
fi
conf=$(find "$dest" -path "*/etc/emqd/emqd.conf" | head -1)
unit=$(find "$dest" -name emqd.service | head -1)
if [ -n "$unit" ] && [ -n "$conf" ]; then
    # The unit reads the config from where it was installed.
    grep -q "^ExecStart=$prefix/sbin/emqd --config ${conf#$dest}\$" "$unit" ||
        { echo "the unit's ExecStart does not match the install:"; grep ExecStart "$unit"; fail=1; }
fi
if [ -n "$conf" ]; then
    cmp -s "$conf" "$conf.example" ||
        { echo "a first install's emqd.conf is not the example"; fail=1; }
    # An operator edits the config; the upgrade must keep the edit.
    echo "token-file = /etc/emqd/token" >>"$conf"
    cp "$conf" "$dest/edited"
    echo "# stale" >>"$conf.example"
    meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$dest.log" 2>&1 ||
        { cat "$dest.log"; rm -f "$dest.log"; exit 1; }
    rm -f "$dest.log"
    if cmp -s "$conf" "$dest/edited"; then
        echo "kept: the edited emqd.conf survived a second install"
    else
        echo "a second install overwrote the edited emqd.conf"
        fail=1
    fi
    if grep -q "^# stale" "$conf.example"; then
        echo "a second install did not refresh emqd.conf.example"
        fail=1
    fi
fi
exit $fail
