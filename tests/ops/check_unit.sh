#!/bin/sh
# check_unit.sh UNIT EMQD: systemd-analyze verify accepts the unit, with
# its ExecStart pointed at the built emqd (the installed path does not
# exist yet). verify exits 0 on unknown keys and bad values, only warning:
# any output at all fails the test. Skipped (77) without systemd-analyze.
set -u
unit=$1 emqd=$2
command -v systemd-analyze >/dev/null 2>&1 || { echo "no systemd-analyze: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed "s#^ExecStart=[^ ]*#ExecStart=$emqd#" "$unit" > "$dir/emqd.service"
grep -q "^ExecStart=$emqd " "$dir/emqd.service" || { echo "no ExecStart to point"; exit 1; }
out=$(systemd-analyze verify --man=no "$dir/emqd.service" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] && [ -z "$out" ] || { echo "systemd-analyze verify: rc $rc"; exit 1; }
for key in Type=notify ExecReload= Restart=on-failure DynamicUser=yes StateDirectory=emqd \
           NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes \
           RestrictAddressFamilies= LimitNOFILE= LoadCredential=emqd.token \
           LoadCredential=emqd.redis-password; do
    grep -q "^$key" "$unit" || { echo "the unit lacks $key"; exit 1; }
done
echo "ok: $unit"
