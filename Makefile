# kubevirt-ovn: the README's two commands are `make demo` and `make test`.
GO           ?= go
OVN_PACKAGES := ovn-central ovn-host openvswitch-switch
# etcd backs the real Kubernetes API server of the controller tests; jq
# builds the model schema in `make generate`.
TEST_PACKAGES := etcd-server jq
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
KEEP         ?=
# ZONES=1: the demo on interconnect OVN (one NB, SB and northd per zone).
ZONES        ?=

.PHONY: all build image deps generate check-generate check-format vet lint test test-ofm demo bench soak clean

all: build

build:
	$(GO) build -o bin/kubevirt-ovn ./cmd/kubevirt-ovn

# The image deploy/deployment.yaml runs, built without a container engine:
# bin/kubevirt-ovn-image.tar (IMAGE, default kubevirt-ovn:latest; a static
# binary for IMAGE_ARCH, default this machine's) for `docker load -i`,
# `podman load -i` or `kind load image-archive`. deploy/Containerfile builds
# the same image with an engine (deploy/README.md, "The image").
IMAGE      ?= kubevirt-ovn:latest
IMAGE_ARCH ?=
image:
	$(GO) run ./integration/cmd/image -o bin/kubevirt-ovn-image.tar -tag $(IMAGE) $(if $(IMAGE_ARCH),-arch $(IMAGE_ARCH))

# Debian 12's OVN 23.03, OVS 3.1 and etcd, installed when missing. Their
# own services are not used: tests and the demo run private daemons.
deps:
	@missing=; for b in ovsdb-server ovsdb-tool ovn-northd ovn-nbctl ovn-sbctl ovn-controller ovs-vswitchd etcd jq; do \
	  command -v $$b >/dev/null 2>&1 || missing="$$missing $$b"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing $(OVN_PACKAGES) $(TEST_PACKAGES) (missing:$$missing)"; \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $(OVN_PACKAGES) $(TEST_PACKAGES); \
	fi

# Regenerate the libovsdb models from the pinned schemas (needs jq).
generate:
	$(GO) generate ./nbmodel/...

# Fail when the committed models (and the schema files they are generated
# from, built from the pinned OVN schemas in integration/testdata/schemas)
# differ from a fresh generation.
check-generate: generate
	@if [ -n "$$(git status --porcelain -- nbmodel)" ]; then \
	  git status --short -- nbmodel; git diff --stat -- nbmodel; \
	  echo "nbmodel/ differs from a fresh 'make generate': generated code is never edited by hand"; exit 1; fi

check-format:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi

vet:
	$(GO) vet ./...

# staticcheck and goimports, pinned as tools in go.mod (go tool): imports
# grouped standard library, others, then this module's; generated models
# excepted.
lint:
	$(GO) tool staticcheck ./...
	@out=$$($(GO) tool goimports -local github.com/kubevirt-ovn/kubevirt-ovn -l $$(git ls-files '*.go' | grep -v '^nbmodel/')); \
	  if [ -n "$$out" ]; then echo "goimports -local github.com/kubevirt-ovn/kubevirt-ovn would change: $$out"; exit 1; fi

# OVN: the OVN releases the packet suite (integration/) runs on, one after
# the other. "host" is the host's OVN (Debian 12's 23.03 from `make deps`);
# 23.03, 25.03 and 26.03 are Debian's packages of that release in a root
# file system of their own (integration/releases/root.sh: debootstrap of
# the suite carrying it, built once and cached in KUBEVIRT_OVN_CACHE,
# default /var/cache/kubevirt-ovn), whose daemons run as host processes.
# `make test OVN=26.03` runs it on 26.03 alone; `make demo OVN=26.03` shows
# the demo on it.
OVN ?= host 26.03

# Measured numbers (failover times) are printed after the tests. The
# packet suite (integration) runs on every release of OVN at once
# (integration/releases/suites.sh), each line prefixed with its release,
# and longer than go test's default 10-minute limit per package on a
# loaded 2-core machine; 40 minutes per release.
# Kubernetes' own API server (integration/kube-apiserver, its own module)
# and the releases' root file systems are built first, outside the tests'
# time limit.
test: deps check-generate check-format vet lint
	@mkdir -p bin && rm -f bin/measured.txt
	$(GO) build -C integration/kube-apiserver -o $(CURDIR)/bin/kube-apiserver .
	KUBEVIRT_OVN_KUBE_APISERVER=$(CURDIR)/bin/kube-apiserver $(GO) test -count=1 -timeout 20m $$($(GO) list ./... | grep -v '/integration$$')
	KUBEVIRT_OVN_KUBE_APISERVER=$(CURDIR)/bin/kube-apiserver KUBEVIRT_OVN_REPORT=$(CURDIR)/bin/measured.txt GO=$(GO) \
	  bash integration/releases/suites.sh $(OVN)
	@if [ -s bin/measured.txt ]; then echo "measured:"; cat bin/measured.txt; fi
	@du -sh $${KUBEVIRT_OVN_CACHE:-/var/cache/kubevirt-ovn}/ovn-* 2>/dev/null | sed 's/^/OVN root file system: /' || true

# The packet suite on an ovn-fake-multinode cluster (podman containers, VMs
# with real kernel stacks; integration/README.md). Not part of `make test`:
# it needs a checkout of github.com/ovn-org/ovn-fake-multinode, OFM_REPO.
# Installs podman, runc and debootstrap, builds the node image from Debian's
# packages, starts the cluster, runs the suite, removes everything it made
# and prints what it measured. Run as root.
# OFM_OVN=26.03 (or 25.03) builds the nodes from that release's packages
# (the root file systems of OVN above); 23.03 by default.
OFM_REPO ?=
OFM_OVN  ?= 23.03
test-ofm:
	@OFM_REPO="$(OFM_REPO)" OFM_OVN="$(OFM_OVN)" GO="$(GO)" bash integration/ofm/ofm.sh test

demo: deps build
	@r=$(firstword $(OVN)); root=; [ $$r = host ] || root=$$(bash integration/releases/root.sh $$r) || exit 1; \
	KUBEVIRT_OVN_ROOT=$$root $(GO) run ./integration/cmd/demo -bin bin/kubevirt-ovn -examples deploy/examples $(if $(KEEP),-keep) $(if $(ZONES),-zones)

# Measure the binary on a private OVN: N = 10, 100, 1000, 3000 routers, full
# and no-op sync against the raw single-transaction floor and batched
# ovn-nbctl, and `run` event latency; prints a markdown table. Pass more
# flags with BENCH_FLAGS, e.g. BENCH_FLAGS="-n 10,100 -events 20 -v".
# First, the manifest reader's paths against each other (ns/file, x_fast),
# and what an informer keeps of a realistic VMI (B-kept/vmi, whole and as
# kept: translator/kube/slim.go).
# N=10000: the plain input alone at 10 and N routers (sync, `run`'s cold
# and warm start, events, and the warm start again under GOMEMLIMIT=1900MiB,
# as a Deployment with a 2 GiB limit holds it), nothing else; run's
# profiles go to bin/profiles.
# ZONES=50: the interconnect bench alone, at ZONES_BASE (10) and ZONES
# zones, ZONE_ROUTERS (20) routers per zone, on a real kube-apiserver
# (integration/performance.md, "Interconnect"); zone 0's agent's profiles
# go to bin/profiles.
BENCH_FLAGS  ?=
N            ?=
ZONES_BASE   ?= 10
ZONE_ROUTERS ?= 20
comma        := ,
bench: deps build
	$(if $(ZONES)$(N),,$(GO) test -run '^$$' -bench DecodePaths ./translator/manifest/)
	$(if $(ZONES)$(N),,$(GO) test -run '^$$' -bench VMIKept ./translator/kube/)
	$(if $(ZONES),$(GO) build -C integration/kube-apiserver -o $(CURDIR)/bin/kube-apiserver .)
	$(GO) run ./integration/cmd/bench -bin bin/kubevirt-ovn \
	  $(if $(N),-n 10$(comma)$(N) -events-n 10$(comma)$(N) -start-n $(N) -fip-n '' -sg-n '' -v6-n '' -migrations-vms 0 -budget 90m -timeout 20m -profile bin/profiles -northd-max 3000 -memlimit 1900MiB) \
	  $(if $(ZONES),$(if $(N),,-n '') -migrations-vms 0 -zones $(ZONES_BASE)$(comma)$(ZONES) -zone-routers $(ZONE_ROUTERS) -timeout 15m -profile bin/profiles) \
	  $(BENCH_FLAGS)

# The soak (integration/soak_test.go; integration/README.md, "The soak"):
# a seeded random workload through files and Kubernetes objects, with
# faults, on a Raft NB with gateways and workers, for SOAK (default 10m),
# on the first release of OVN. Its report goes to bin/soak.txt. SOAK_SEED
# replays a run (a failure prints its seed); SOAK_BUG=1 builds in the
# deliberate bug the soak must catch (translator/controller/soakbug.go).
# `make test` runs a short one (90s) in the packet suite.
SOAK      ?= 10m
SOAK_SEED ?=
SOAK_BUG  ?=
soak: deps
	@mkdir -p bin && rm -f bin/soak.txt
	$(GO) build -C integration/kube-apiserver -o $(CURDIR)/bin/kube-apiserver .
	@r=$(firstword $(OVN)); root=; [ $$r = host ] || root=$$(bash integration/releases/root.sh $$r) || exit 1; \
	KUBEVIRT_OVN_ROOT=$$root KUBEVIRT_OVN_KUBE_APISERVER=$(CURDIR)/bin/kube-apiserver \
	KUBEVIRT_OVN_SOAK=$(SOAK) KUBEVIRT_OVN_SOAK_SEED=$(SOAK_SEED) KUBEVIRT_OVN_SOAK_REPORT=$(CURDIR)/bin/soak.txt \
	KUBEVIRT_OVN_BUILD_TAGS=$(if $(SOAK_BUG),soakbug) \
	  $(GO) test -count=1 -timeout 24h -run '^TestSoak' ./integration/; rc=$$?; \
	[ -s bin/soak.txt ] && cat bin/soak.txt; exit $$rc

clean:
	rm -rf bin
