#!/usr/bin/env bash
# root.sh RELEASE: prints the root file system that holds OVN RELEASE
# (23.03, 25.03, 26.03) from Debian's archive, building it the first time:
# debootstrap --variant=minbase of the suite that carries the release, then
# ovn-central ovn-host openvswitch-switch installed in it with no service
# started. Cached under $KUBEVIRT_OVN_CACHE (default
# /var/cache/kubevirt-ovn) as ovn-RELEASE; a root is used only once it is
# complete and holds the release asked for. Needs root (debootstrap,
# chroot); downloads nothing but Debian's packages, from the mirror the
# host's apt uses (or $KUBEVIRT_OVN_MIRROR).
#
# The integration harness runs the release's binaries as host processes
# through the release's own dynamic loader (integration/README.md, "Other
# OVN releases"): nothing here is started, and nothing stays mounted.
set -euo pipefail

rel=${1:-}
case "$rel" in
  23.03) suite=bookworm ;;
  25.03) suite=trixie ;;
  26.03) suite=sid ;;
  *) echo "root.sh: OVN release '$rel' is not one Debian's archive carries here (23.03 bookworm, 25.03 trixie, 26.03 sid)" >&2; exit 2 ;;
esac
cache=${KUBEVIRT_OVN_CACHE:-/var/cache/kubevirt-ovn}
root=$cache/ovn-$rel
mark=$root/.kubevirt-ovn-release

log() { echo "root.sh: $*" >&2; }

if [ -f "$mark" ]; then
  echo "$root"
  exit 0
fi

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
if ! command -v debootstrap >/dev/null 2>&1 && [ ! -x /usr/sbin/debootstrap ]; then
  log "installing debootstrap"
  $SUDO apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends debootstrap >&2
fi

mirror=${KUBEVIRT_OVN_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1 || true)
fi
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^deb  *\(\[[^]]*\] *\)\{0,1\}\([^ ]*\) .*/\2/p' /etc/apt/sources.list 2>/dev/null | grep -v security | head -1 || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}

$SUDO mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.ovn-$rel.XXXXXX")
cleanup() {
  mountpoint -q "$tmp/proc" 2>/dev/null && $SUDO umount "$tmp/proc"
  $SUDO rm -rf "$tmp"
}
trap cleanup EXIT

start=$(date +%s)
log "OVN $rel: debootstrap $suite from $mirror into $tmp"
if ! $SUDO debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$tmp.log" 2>&1; then
  tail -20 "$tmp.log" >&2
  exit 1
fi
rm -f "$tmp.log"
# Package scripts start no service; the archive snapshot's Release files may
# be past their Valid-Until date.
printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$tmp/usr/sbin/policy-rc.d" >/dev/null
$SUDO chmod +x "$tmp/usr/sbin/policy-rc.d"
echo 'Acquire::Check-Valid-Until "false";' | $SUDO tee "$tmp/etc/apt/apt.conf.d/99kubevirt-ovn" >/dev/null
$SUDO mount -t proc proc "$tmp/proc"
log "OVN $rel: installing ovn-central ovn-host openvswitch-switch"
if ! $SUDO chroot "$tmp" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ovn-central ovn-host openvswitch-switch && apt-get clean' >"$tmp.log" 2>&1; then
  tail -30 "$tmp.log" >&2
  exit 1
fi
rm -f "$tmp.log"
$SUDO umount "$tmp/proc"
$SUDO rm -rf "$tmp/var/lib/apt/lists" "$tmp/usr/share/doc" "$tmp/usr/share/man" "$tmp/usr/share/locale"

got=$($SUDO chroot "$tmp" dpkg-query -W -f '${Version}' ovn-common)
ovs=$($SUDO chroot "$tmp" dpkg-query -W -f '${Version}' openvswitch-common)
case "$got" in
  "$rel".*) ;;
  *) echo "root.sh: Debian $suite carries OVN $got now, not $rel: the release table in integration/releases/root.sh needs updating" >&2; exit 1 ;;
esac
printf 'release=%s\nsuite=%s\novn=%s\novs=%s\n' "$rel" "$suite" "$got" "$ovs" | $SUDO tee "$tmp/.kubevirt-ovn-release" >/dev/null
$SUDO rm -rf "$root"
$SUDO mv "$tmp" "$root"
trap - EXIT
log "OVN $rel: $got (OVS $ovs) in $root, $(( $(date +%s) - start )) s, $(du -sh "$root" | cut -f1)"
echo "$root"
