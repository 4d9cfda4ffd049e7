#!/bin/bash
# kubevirt-ovn's packet suite on an ovn-fake-multinode cluster
# (github.com/ovn-org/ovn-fake-multinode, its ovn_cluster.sh unmodified):
# 1 central, 2 gateways and 2 chassis as podman containers, VMs as network
# namespaces in the chassis with real kernel stacks.
#
#   ofm.sh test    deps, image, start, the suite, stop (make test-ofm)
#   ofm.sh deps    install podman, runc, debootstrap and the host's tools
#   ofm.sh image   build the node image from Debian's packages of OFM_OVN
#   ofm.sh start   start the cluster (host fixes only without kernel OVS)
#   ofm.sh stop    stop and remove what start made; restore the host
#
# OFM_REPO is a checkout of ovn-fake-multinode (needed by start and stop).
# Everything stays on this machine: the underlay (OFM_UNDERLAY) and the
# external network are private ranges on bridges of their own; the host
# gets no address or route on them (the suite reaches the NB and SB through
# the central container's unix sockets).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OFM_WORK=${OFM_WORK:-/tmp/kubevirt-ovn-ofm}
# OFM_OVN: the OVN release of the nodes (23.03, 25.03, 26.03): Debian's
# packages of it, the root file system integration/releases/root.sh builds
# (and caches) for the packet suite, imported as the image's base.
OFM_OVN=${OFM_OVN:-23.03}
OFM_BASE=localhost/kubevirt-ovn/ofm-base:ovn-$OFM_OVN
OFM_IMAGE=${OFM_IMAGE:-localhost/kubevirt-ovn/ofm-node:ovn-$OFM_OVN}
OFM_MIRROR=${OFM_MIRROR:-}
# The underlay: 10.239.0.0/24, the central at .2 (ovn_cluster.sh's
# IP_HOST/IP_CIDR/IP_START; its default 170.168.0.0/16 is not private).
OFM_UNDERLAY=${OFM_UNDERLAY:-10.239.0.0/24}
HOST_PACKAGES="openvswitch-switch podman runc debootstrap tcpdump iputils-arping netcat-openbsd socat ethtool iproute2 uuid-runtime python3 bc"

export CONTAINERS_CONF=$OFM_WORK/containers.conf
export RUNC_CMD=podman
export CENTRAL_IMAGE=$OFM_IMAGE CHASSIS_IMAGE=$OFM_IMAGE GW_IMAGE=$OFM_IMAGE RELAY_IMAGE=$OFM_IMAGE
export CHASSIS_COUNT=2 GW_COUNT=2 CENTRAL_COUNT=1 CREATE_FAKE_VMS=no
export IP_HOST=${OFM_UNDERLAY%/*} IP_CIDR=${OFM_UNDERLAY#*/}
export IP_START=${IP_HOST%.*}.2
export FAKENODE_MNT_DIR=$OFM_WORK/mnt

log() { echo "ofm: $*" >&2; }
[ "$(id -u)" = 0 ] || { log "run as root (containers, namespaces and host bridges)"; exit 2; }
GO=${GO:-go}

# kernel_dp: the openvswitch kernel module is there (or loads). Without
# it, every bridge runs OVS's userspace datapath and the host fixes apply.
kernel_dp() { [ -d /sys/module/openvswitch ] || modprobe -q openvswitch 2>/dev/null; }

if kernel_dp; then
  export OVN_DP_TYPE=system
else
  export OVN_DP_TYPE=netdev
  # A host OVS of our own, in private directories: the containers' veths
  # are bridged by it (br-ovn, br-ovn-ext) and nothing else on the host is.
  export OVS_RUNDIR=$OFM_WORK/ovs/run OVS_LOGDIR=$OFM_WORK/ovs/log OVS_DBDIR=$OFM_WORK/ovs/db OVS_SYSCONFDIR=$OFM_WORK/ovs/etc
fi

deps() {
  local missing=
  for p in $HOST_PACKAGES; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    log "installing$missing"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
  fi
}

conf() {
  mkdir -p "$OFM_WORK" "$FAKENODE_MNT_DIR"
  # podman 4.3 as Debian 12 ships it: the default nofile ulimit cannot be
  # raised without CAP_SYS_RESOURCE, and crun 1.8 refuses hybrid cgroup
  # v1/v2 hosts (runc does not). netns=none: a node has only the links
  # ovn_cluster.sh gives it, so podman sets up no network (and no firewall).
  cat > "$CONTAINERS_CONF" <<'EOC'
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]
netns = "none"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOC
}

mirror() {
  [ -n "$OFM_MIRROR" ] && { echo "$OFM_MIRROR"; return; }
  # the mirror apt already uses
  sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1 ||
    true
}

image() {
  conf
  # The base: the release's root file system (OVN and OVS installed, no
  # service started), imported once per release.
  local rootfs
  rootfs=$(KUBEVIRT_OVN_MIRROR=$(mirror) bash "$ROOT/integration/releases/root.sh" "$OFM_OVN")
  if ! podman image exists "$OFM_BASE"; then
    log "importing $rootfs as $OFM_BASE"
    tar -C "$rootfs" -c . | podman import - "$OFM_BASE" >/dev/null
  fi
  # Rebuilt when the Containerfile or the base changes (a hash of both is
  # a label).
  local sum
  sum=$( (cat "$HERE/Containerfile" "$rootfs/.kubevirt-ovn-release"; echo "$OFM_BASE") | sha256sum | cut -c1-16)
  if [ "$(podman image inspect -f '{{index .Labels "kubevirt-ovn.containerfile"}}' "$OFM_IMAGE" 2>/dev/null)" != "$sum" ]; then
    log "building $OFM_IMAGE"
    mkdir -p "$OFM_WORK/ctx"
    cp "$HERE/Containerfile" "$OFM_WORK/ctx/"
    podman build --network host --build-arg "BASE=$OFM_BASE" --label "kubevirt-ovn.containerfile=$sum" -t "$OFM_IMAGE" \
      -f "$OFM_WORK/ctx/Containerfile" "$OFM_WORK/ctx" >"$OFM_WORK/build.log" 2>&1 ||
      { tail -30 "$OFM_WORK/build.log" >&2; exit 1; }
  fi
}

need_repo() {
  if [ -z "${OFM_REPO:-}" ] || [ ! -x "$OFM_REPO/ovn_cluster.sh" ]; then
    cat >&2 <<EOM
ofm: OFM_REPO must name a checkout of ovn-fake-multinode, e.g.
  git clone https://github.com/ovn-org/ovn-fake-multinode /path/to/ovn-fake-multinode
  make test-ofm OFM_REPO=/path/to/ovn-fake-multinode
EOM
    exit 2
  fi
  OFM_REPO=$(cd "$OFM_REPO" && pwd)
}

# The host's forwarding and firewall settings, saved before start and
# restored (then compared) after stop.
host_state() {
  sysctl -n net.ipv4.ip_forward net.ipv6.conf.all.forwarding 2>/dev/null || true
  command -v iptables-save >/dev/null && iptables-save 2>/dev/null | grep -v '^#' || true
  command -v nft >/dev/null && nft list ruleset 2>/dev/null || true
}

save_host() { host_state >"$OFM_WORK/host-state.before"; sysctl -n net.ipv4.ip_forward >"$OFM_WORK/ip_forward"; sysctl -n net.ipv6.conf.all.forwarding >"$OFM_WORK/ip6_forward" 2>/dev/null || true; }

restore_host() {
  [ -f "$OFM_WORK/ip_forward" ] || return 0
  sysctl -q -w net.ipv4.ip_forward="$(cat "$OFM_WORK/ip_forward")"
  [ -s "$OFM_WORK/ip6_forward" ] && sysctl -q -w net.ipv6.conf.all.forwarding="$(cat "$OFM_WORK/ip6_forward")"
  if ! diff -u "$OFM_WORK/host-state.before" <(host_state) >&2; then
    log "the host's forwarding or firewall settings differ from before start (above)"; return 1
  fi
}

host_ovs() {
  [ "$OVN_DP_TYPE" = netdev ] || return 0
  mkdir -p "$OVS_RUNDIR" "$OVS_LOGDIR" "$OVS_DBDIR" "$OVS_SYSCONFDIR"
  if ! ovs-vsctl --timeout=2 show >/dev/null 2>&1; then
    /usr/share/openvswitch/scripts/ovs-ctl start --system-id=kubevirt-ovn-ofm-host --no-mlockall >"$OVS_LOGDIR/ovs-ctl.log" 2>&1 ||
      { cat "$OVS_LOGDIR/ovs-ctl.log" >&2; exit 1; }
  fi
  # ovn_cluster.sh would create these as kernel bridges.
  for br in br-ovn br-ovn-ext; do
    ovs-vsctl --may-exist add-br $br -- set bridge $br datapath_type=netdev
  done
}

# fixups run in each node after ovn_cluster.sh start, only on the userspace
# datapath: the kernel never completes the checksums of what OVS forwards
# from a veth's packet socket (TCP and UDP die while ping works) and
# userspace geneve leaves only through an OVS bridge's own port (br-phy
# holding eth1 and its address).
fixup() {
  [ "$OVN_DP_TYPE" = netdev ] || return 0
  cat >"$FAKENODE_MNT_DIR/kubevirt-ovn-fixup.sh" <<'EOS'
#!/bin/bash
set -e
for d in eth1 eth2; do [ -e /sys/class/net/$d ] && ethtool -K $d tx off >/dev/null; done
[ "$1" = chassis ] || exit 0
ovs-vsctl br-exists br-phy && exit 0
ip=$(ip -4 -o addr show dev eth1 | awk '{print $4}')
mac=$(cat /sys/class/net/eth1/address)
ovs-vsctl add-br br-phy -- set bridge br-phy datapath_type=netdev other_config:hwaddr=$mac -- add-port br-phy eth1
ip addr flush dev eth1; ip addr add $ip dev br-phy; ip link set br-phy up
EOS
  podman exec ovn-central-az1 bash /data/kubevirt-ovn-fixup.sh central
  for n in ovn-gw-1 ovn-gw-2 ovn-chassis-1 ovn-chassis-2; do
    podman exec $n bash /data/kubevirt-ovn-fixup.sh chassis
  done
}

wait_chassis() {
  local i n
  for i in $(seq 120); do
    n=$(podman exec ovn-central-az1 ovn-sbctl --bare --columns=name list Chassis | grep -c . || true)
    if [ "$n" -ge 4 ]; then
      podman exec ovn-central-az1 ovn-nbctl --timeout=60 --wait=hv sync && return 0
    fi
    sleep 1
  done
  log "the 4 chassis did not register in the SB"; return 1
}

now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc | sed 's/^\./0./'; }

start() {
  need_repo; conf
  if podman ps -a --format '{{.Names}}' | grep -qE '^ovn-(central-az|gw-|chassis-)'; then
    log "ovn-fake-multinode containers exist already (ofm.sh stop removes them)"; exit 1
  fi
  save_host
  local t0 t1 t2
  t0=$(now)
  host_ovs
  (cd "$OFM_REPO" && ./ovn_cluster.sh start) >"$OFM_WORK/start.log" 2>&1 || { tail -30 "$OFM_WORK/start.log" >&2; exit 1; }
  fixup
  t1=$(now)
  wait_chassis
  t2=$(now)
  echo "ovn-fake-multinode start (containers, OVN, host fixes: $OVN_DP_TYPE datapath): $(secs $t0 $t1) s; until 4 chassis registered and realized: $(secs $t1 $t2) s" | tee -a "$OFM_WORK/measured.txt"
}

stop() {
  need_repo; conf
  local veths= rc=0
  if [ "$OVN_DP_TYPE" = netdev ] && ovs-vsctl --timeout=2 show >/dev/null 2>&1; then
    veths=$(ovs-vsctl --bare --columns=name find Interface external_ids:container_id!=\"\" 2>/dev/null | grep . || true)
  fi
  ip netns del kubevirt-ovn-ext 2>/dev/null || true
  (cd "$OFM_REPO" && OVN_BR_CLEANUP=yes ./ovn_cluster.sh stop) >"$OFM_WORK/stop.log" 2>&1 || { tail -20 "$OFM_WORK/stop.log" >&2; rc=1; }
  # The host ends of the nodes' veths go with the nodes' namespaces, minutes
  # later: delete them now.
  for v in $veths; do ip link del "$v" 2>/dev/null || true; done
  if [ "$OVN_DP_TYPE" = netdev ] && [ -f "$OVS_RUNDIR/ovs-vswitchd.pid" ]; then
    /usr/share/openvswitch/scripts/ovs-ctl stop >>"$OVS_LOGDIR/ovs-ctl.log" 2>&1 || rc=1
    rm -rf "$OFM_WORK/ovs"
  fi
  restore_host || rc=1
  local left
  left=$(podman ps -a --format '{{.Names}}' | grep -E '^ovn-(central-az|gw-|chassis-)' || true)
  [ -z "$left" ] || { log "containers left: $left"; rc=1; }
  left=$(ip -o link show | awk -F': ' '{print $2}' | grep -E '^(br-ovn|br-ovn-ext|kubevirt-ovn-ext.*)(@|$)' || true)
  [ -z "$left" ] || { log "host links left: $left"; rc=1; }
  return $rc
}

suite() {
  local rc=0
  mkdir -p "$ROOT/bin"
  KUBEVIRT_OVN_REPORT=$OFM_WORK/measured.txt \
    "$GO" -C "$ROOT" test -tags ofm -count=1 -timeout 30m ${OFM_TEST_FLAGS:-} ./integration/ofm/ || rc=$?
  return $rc
}

test_all() {
  need_repo
  local t0 rc=0
  deps
  t0=$(now)
  image
  echo "node image ready: $(secs $t0 "$(now)") s" >"$OFM_WORK/measured.txt.image"
  rm -f "$OFM_WORK/measured.txt"
  cat "$OFM_WORK/measured.txt.image" >"$OFM_WORK/measured.txt"
  trap 'stop || true' EXIT
  start
  suite || rc=$?
  trap - EXIT
  stop || rc=1
  echo "measured:"; cat "$OFM_WORK/measured.txt"
  [ $rc = 0 ] && echo "ofm: PASS" || echo "ofm: FAIL"
  return $rc
}

case "${1:-}" in
  deps) deps ;;
  image) deps; image ;;
  start) start ;;
  stop) stop ;;
  test) test_all ;;
  *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
