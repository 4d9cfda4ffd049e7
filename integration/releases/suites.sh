#!/usr/bin/env bash
# suites.sh RELEASE...: the packet suite (./integration) on each OVN
# release at once (host: the host's OVN; else root.sh's root file system),
# each line of its output prefixed with its release. Fails when one fails.
#
# At once because the suite mostly waits on OVN (a port bound, BFD up, a
# lease lost, a periodic advertisement) rather than computes: one release
# after the other took 52-55 minutes of `make test` on a 2-core machine, at
# once about half that. Every test's daemons have their own directory and
# loopback ports, so two suites share nothing but the build cache. The roots
# are built first (debootstrap), before any suite starts.
#
# Environment: GO (default go), KUBEVIRT_OVN_KUBE_APISERVER, and
# KUBEVIRT_OVN_REPORT (measured lines, each naming its release) are passed
# on; SUITE_TIMEOUT is go test's -timeout per release (default 40m).
set -euo pipefail

go=${GO:-go}
timeout=${SUITE_TIMEOUT:-40m}
declare -A root
for r in "$@"; do
  root[$r]=
  if [ "$r" != host ]; then
    root[$r]=$(bash "$(dirname "$0")/root.sh" "$r")
  fi
done

status=$(mktemp -d)
trap 'rm -rf "$status"' EXIT
for r in "$@"; do
  echo "packet suite (./integration) on OVN $r${root[$r]:+ (${root[$r]})}"
  {
    start=$(date +%s)
    rc=0
    KUBEVIRT_OVN_ROOT=${root[$r]} "$go" test -count=1 -timeout "$timeout" ./integration/ 2>&1 || rc=$?
    echo "packet suite on OVN $r: $(( $(date +%s) - start )) s, exit status $rc"
    echo "$rc" > "$status/$r"
  } | sed -u "s/^/[OVN $r] /" &
done
wait

failed=0
for r in "$@"; do
  [ "$(cat "$status/$r" 2>/dev/null)" = 0 ] || failed=1
done
exit "$failed"
