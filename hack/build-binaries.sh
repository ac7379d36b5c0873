#!/usr/bin/env bash
# Build the control-plane binaries the tests run against, from pinned Go modules.
#
#   hack/build-binaries.sh            build whatever is missing, print the bin directory
#   hack/build-binaries.sh helm ...   build only these components (etcd, kubernetes, kwok, jobset, helm,
#                                     kueue, trainer, upstream-render; and for the kind tier: kind,
#                                     kubernetes-node, coredns, crictl, pause, upstream-e2e, kueue-e2e,
#                                     agnhost, scheduler-plugins; gotypes, the Go type table generator;
#                                     volcano, built only when named: hack/e2e-setup-kind.sh with VOLCANO=1)
#   hack/build-binaries.sh --print    print the bin directory only, build nothing
#
# Each component is built into its own versioned directory under
#   ${TRAINER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeflow-trainer-py}/bin/<component>-<version>/
# and is rebuilt only when that directory is missing. upstream-render is this repository's own program
# (hack/tools/upstream-render/main.go), so its directory name also carries a hash of the wrapper's files:
# editing main.go, go.mod or go.sum names a new directory, and the next run builds it. The wrapper modules in
# hack/tools/<component>/ pin every dependency (go.mod/go.sum are committed);
# the binaries are never committed. Third-party CRDs stay in the Go module cache
# and are read from there at run time (test/support/thirdparty.py).
#
# Before building, it checks that go (>= 1.26) is on PATH, that there is room for
# a cold build, and that the Go module proxy answers one small download within
# TRAINER_PROXY_CHECK_TIMEOUT seconds (default 300); each failure is one clear line.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${TRAINER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeflow-trainer-py}
log_dir="$cache/build-logs"
proxy_check_timeout=${TRAINER_PROXY_CHECK_TIMEOUT:-300}

die() { echo "build-binaries: error: $*" >&2; exit 1; }
say() { echo "build-binaries: $*" >&2; }

k8s_dir="$cache/bin/kubernetes-$KUBERNETES_VERSION"
etcd_dir="$cache/bin/etcd-$ETCD_VERSION"
kwok_dir="$cache/bin/kwok-$KWOK_VERSION"
jobset_dir="$cache/bin/jobset-$JOBSET_VERSION"
helm_dir="$cache/bin/helm-$HELM_VERSION"
kueue_dir="$cache/bin/kueue-$KUEUE_VERSION"
# Upstream's Go controller, the baseline of the benchmarks and of the take-over tests.
trainer_dir="$cache/bin/trainer-$TRAINER_VERSION"
# Upstream's object-building code run offline (hack/tools/upstream-render): the parity tests' reference.
upstream_render_hash=$(cd "$here/tools/upstream-render" && cat go.mod go.sum main.go | sha256sum | cut -c1-12)
upstream_render_dir="$cache/bin/upstream-render-$TRAINER_VERSION-$upstream_render_hash"
# Upstream's own e2e suite (the package test/e2e of the Trainer module, unmodified, compiled by `go test -c`),
# run against this project's manager on kind (test/e2e/test_upstream_e2e.py). The wrapper
# hack/tools/upstream-e2e pins the suite's imports, so its files' hash names the directory too.
upstream_e2e_hash=$(cd "$here/tools/upstream-e2e" && cat go.mod go.sum deps.go | sha256sum | cut -c1-12)
upstream_e2e_dir="$cache/bin/upstream-e2e-$TRAINER_VERSION-$upstream_e2e_hash"
# Kueue's own e2e suite (the package test/e2e/singlecluster of the Kueue module, unmodified, compiled by
# `go test -c`), run against this project's manager on kind (test/e2e/test_kueue_e2e.py); named like
# upstream-e2e, by the version and a hash of the wrapper hack/tools/kueue-e2e that pins its imports.
kueue_e2e_hash=$(cd "$here/tools/kueue-e2e" && cat go.mod go.sum deps.go | sha256sum | cut -c1-12)
kueue_e2e_dir="$cache/bin/kueue-e2e-$KUEUE_VERSION-$kueue_e2e_hash"
# agnhost, the test program Kueue's specs run in their pods (k8s.io/kubernetes/test/images/agnhost of the
# Kubernetes module this project pins, whose agnhost VERSION is the one Kueue's specs name).
agnhost_dir="$cache/bin/agnhost-$KUBERNETES_VERSION-$(cd "$here/tools/agnhost" && cat go.mod go.sum | sha256sum | cut -c1-12)"
# The kind tier: kind, and the node image's own binaries (hack/build-images.sh puts them into images).
kind_dir="$cache/bin/kind-$KIND_VERSION"
k8s_node_dir="$cache/bin/kubernetes-node-$KUBERNETES_VERSION"
coredns_dir="$cache/bin/coredns-$COREDNS_VERSION"
crictl_dir="$cache/bin/crictl-$CRI_TOOLS_VERSION"
pause_dir="$cache/bin/pause-$KUBERNETES_VERSION"
# The Go type table generator (hack/tools/gotypes, runtime/api/gotypes.json): a tool of this repository,
# so its directory is named by a hash of its files as well as by the Trainer version it reads.
# scheduler-plugins' scheduler (kube-scheduler with its Coscheduling plugin) and PodGroup controller, the kind
# tier's gang scheduler; named by the version, the wrapper's files (some replacements differ from the
# module's own: hack/tools/update-wrappers.sh says why) and the link flags. Not its Makefile's
# `-X k8s.io/component-base/version.gitVersion=v0.34.7`: component-base then takes 0.34 for the Kubernetes
# version of the binary, and kube-scheduler refuses to start ("emulation version 0.34 is not between
# [1.31, 0.34.0]"); unstamped, it takes the Kubernetes version it is built from (1.34).
scheduler_plugins_ldflags="-s -w"
scheduler_plugins_dir="$cache/bin/scheduler-plugins-$SCHEDULER_PLUGINS_VERSION-$(cd "$here/tools/scheduler-plugins" &&
  { cat go.mod go.sum; echo "$scheduler_plugins_ldflags"; } | sha256sum | cut -c1-12)"
# Volcano's scheduler and controller manager (not its webhook manager: the kind tier installs Volcano without
# its admission webhooks, docs/development.md says why), stamped as its Makefile stamps the version; named by
# the version, the wrapper's files and the link flags, as scheduler-plugins' are.
volcano_ldflags="-s -w -X volcano.sh/volcano/pkg/version.Version=$VOLCANO_VERSION"
volcano_dir="$cache/bin/volcano-$VOLCANO_VERSION-$(cd "$here/tools/volcano" &&
  { cat go.mod go.sum; echo "$volcano_ldflags"; } | sha256sum | cut -c1-12)"
gotypes_dir="$cache/bin/gotypes-$TRAINER_VERSION-$(cat "$here"/tools/gotypes/go.mod "$here"/tools/gotypes/go.sum \
  "$here"/tools/gotypes/*.go | sha256sum | cut -c1-12)"

print_dirs() {
  printf 'KUBERNETES_BIN=%s\nETCD_BIN=%s\nKWOK_BIN=%s\nJOBSET_BIN=%s\nHELM_BIN=%s\nKUEUE_BIN=%s\nTRAINER_BIN=%s\n' \
    "$k8s_dir" "$etcd_dir" "$kwok_dir" "$jobset_dir" "$helm_dir" "$kueue_dir" "$trainer_dir"
  printf 'UPSTREAM_RENDER_BIN=%s\nUPSTREAM_E2E_BIN=%s\n' "$upstream_render_dir" "$upstream_e2e_dir"
  printf 'KUEUE_E2E_BIN=%s\nAGNHOST_BIN=%s\n' "$kueue_e2e_dir" "$agnhost_dir"
  printf 'KIND_BIN=%s\nKUBERNETES_NODE_BIN=%s\nCOREDNS_BIN=%s\nCRICTL_BIN=%s\nPAUSE_BIN=%s\n' \
    "$kind_dir" "$k8s_node_dir" "$coredns_dir" "$crictl_dir" "$pause_dir"
  printf 'GOTYPES_BIN=%s\nSCHEDULER_PLUGINS_BIN=%s\nVOLCANO_BIN=%s\n' "$gotypes_dir" "$scheduler_plugins_dir" \
    "$volcano_dir"
}

if [[ "${1:-}" == "--print" ]]; then
  print_dirs
  exit 0
fi

complete() {  # complete DIR BINARY...: every binary is present
  local dir=$1; shift
  for b in "$@"; do [[ -x "$dir/$b" ]] || return 1; done
}

preflight() {
  command -v go >/dev/null 2>&1 || die "Go is not installed (need go >= 1.26 on PATH; see docs/development.md)"
  local gov; gov=$(go env GOVERSION | sed 's/^go//')
  local major=${gov%%.*} rest=${gov#*.}; local minor=${rest%%.*}
  if (( major < 1 || (major == 1 && minor < 26) )); then
    die "Go $gov is too old: Kubernetes ${KUBERNETES_VERSION} and kwok ${KWOK_VERSION} need go >= 1.26"
  fi
  mkdir -p "$cache/bin" "$log_dir"
  # A cold build needs about 4 GiB for modules and the build cache, and ~1 GiB of binaries.
  local need_kb=$((6 * 1024 * 1024)) avail_kb
  for d in "$cache" "$(go env GOMODCACHE | sed 's:/[^/]*$::')" "$(go env GOCACHE | sed 's:/[^/]*$::')"; do
    mkdir -p "$d" 2>/dev/null || true
    avail_kb=$(df -Pk "$d" | awk 'NR==2 {print $4}')
    if (( avail_kb < need_kb )); then
      die "only $((avail_kb / 1024)) MiB free under $d; a cold build needs about 6 GiB (modules, build cache, binaries)"
    fi
  done
  # One small download first, bounded, so an unreachable or stalled proxy is named now rather than
  # showing up as a silent hang (or a build log full of errors) minutes into the first build.
  local rc=0
  (cd "$here/tools/etcd" && GOFLAGS=-mod=mod timeout "$proxy_check_timeout" \
    go mod download go.etcd.io/etcd/server/v3) >/dev/null 2>"$log_dir/proxy-check.log" || rc=$?
  if (( rc == 124 )); then
    die "the Go module proxy did not answer within ${proxy_check_timeout} s (GOPROXY=$(go env GOPROXY));" \
      "set TRAINER_PROXY_CHECK_TIMEOUT to wait longer on a slow proxy"
  elif (( rc != 0 )); then
    die "cannot download Go modules (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY));" \
      "see $log_dir/proxy-check.log"
  fi
}

# The temporary directory of the build in progress: removed however the script ends (failure, Ctrl-C,
# SIGTERM), so an interrupted build leaves neither a half-filled bin directory nor a stray copy behind.
building=""
trap '[[ -z "$building" ]] || rm -rf "$building"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build() {  # build NAME DIR CMD...: run CMD into a temp dir, then move it into place
  local name=$1 dir=$2; shift 2
  local tmp="$dir.tmp.$$" start=$SECONDS
  rm -rf "$tmp"; mkdir -p "$tmp"
  building=$tmp
  say "building $name (log: $log_dir/$name.log)"
  local rc=0
  ( OUT="$tmp" "$@" ) >"$log_dir/$name.log" 2>&1 || rc=$?
  # Interrupted (Ctrl-C reaches the whole process group): end with the signal's status, whether or not
  # this shell has run its INT/TERM trap yet (on a loaded machine the build's status can arrive first).
  (( rc != 130 && rc != 143 )) || exit "$rc"
  if (( rc != 0 )); then
    tail -n 20 "$log_dir/$name.log" >&2
    die "building $name failed; full log in $log_dir/$name.log"
  fi
  rm -rf "$dir"; mv "$tmp" "$dir"
  building=""
  say "built $name in $((SECONDS - start)) s: $(du -sh "$dir" | cut -f1)"
}

export CGO_ENABLED=0
export GOFLAGS=-mod=readonly

kubernetes_ldflags() {  # the version stamps `kubectl version` and the components report
  local minor; minor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)
  local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local v="-X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION"
  v+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  v+=" -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=$date"
  v+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION"
  v+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  echo "-s -w $v"
}

build_kubernetes() {
  cd "$here/tools/k8s"
  go build -trimpath -ldflags "$(kubernetes_ldflags)" -o "$OUT/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
}

build_etcd() {
  cd "$here/tools/etcd"
  go build -trimpath -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3
}

build_kwok() {
  cd "$here/tools/kwok"
  go build -trimpath -ldflags "-s -w" -o "$OUT/" sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
}

build_jobset() {
  cd "$here/tools/jobset"
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION" \
    -o "$OUT/jobset" sigs.k8s.io/jobset
}

build_helm() {  # only the helm command: no race detector, no other binaries of the module
  cd "$here/tools/helm"
  go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    -o "$OUT/helm" helm.sh/helm/v4/cmd/helm
}

build_kueue() {
  cd "$here/tools/kueue"
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
    -o "$OUT/kueue" sigs.k8s.io/kueue/cmd/kueue
}

build_trainer() {  # upstream Kubeflow Trainer's controller manager, unmodified
  cd "$here/tools/trainer"
  go build -trimpath -ldflags "-s -w" -o "$OUT/trainer-controller-manager" \
    github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
}

# Upstream's runtime registry and plugins behind a small main (hack/tools/upstream-render/main.go).
build_upstream_render() {
  cd "$here/tools/upstream-render"
  go build -trimpath -ldflags "-s -w" -o "$OUT/upstream-render" .
}

# Upstream's e2e suite as a test binary: the package of the Trainer module in the Go module cache, as it is
# there (its testdata is embedded), with the dependency versions the wrapper pins (upstream's own).
build_upstream_e2e() {
  cd "$here/tools/upstream-e2e"
  go test -c -trimpath -ldflags "-s -w" -o "$OUT/e2e.test" github.com/kubeflow/trainer/v2/test/e2e
}

# Kueue's e2e suite as a test binary: the package of the Kueue module in the Go module cache, as it is
# there, with the dependency versions the wrapper pins (Kueue's own).
build_kueue_e2e() {
  cd "$here/tools/kueue-e2e"
  go test -c -trimpath -ldflags "-s -w" -o "$OUT/e2e.test" sigs.k8s.io/kueue/test/e2e/singlecluster
}

# agnhost from the Kubernetes module, through a wrapper of its own (hack/tools/agnhost: the Kubernetes
# wrapper's replacements, with the go.sum entries of agnhost's own imports), stamped with the version its
# directory's VERSION file gives, as the image upstream publishes is.
build_agnhost() {
  cd "$here/tools/agnhost"
  local dir; dir=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/agnhost
  go build -trimpath -ldflags "-s -w -X main.Version=$(cat "$dir/VERSION")" -o "$OUT/agnhost" \
    k8s.io/kubernetes/test/images/agnhost
}

# The node's own Kubernetes binaries, from the same wrapper and build cache as the control plane's.
build_kubernetes_node() {
  cd "$here/tools/k8s"
  go build -trimpath -ldflags "$(kubernetes_ldflags)" -o "$OUT/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kube-proxy
}

build_kind() {
  cd "$here/tools/kind"
  go build -trimpath -ldflags "-s -w" -o "$OUT/kind" sigs.k8s.io/kind
}

build_coredns() {
  cd "$here/tools/coredns"
  go build -trimpath -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" \
    -o "$OUT/coredns" github.com/coredns/coredns
}

build_crictl() {
  cd "$here/tools/crictl"
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRI_TOOLS_VERSION" \
    -o "$OUT/crictl" sigs.k8s.io/cri-tools/cmd/crictl
}

# The pause container of Kubernetes' own source (build/pause in the k8s.io/kubernetes module), static.
build_pause() {
  cd "$here/tools/k8s"
  command -v gcc >/dev/null 2>&1 || { echo "gcc is needed to build the pause binary"; return 1; }
  local src; src=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
  [[ -f "$src" ]] || { go mod download k8s.io/kubernetes && src=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c; }
  gcc -Os -Wall -Werror -static -DVERSION="v$(pause_version)" -o "$OUT/pause" "$src"
  strip "$OUT/pause"
}

# The pause version kubeadm names for this Kubernetes release (its constants), so the image is tagged as
# the kubelet and kubeadm expect it.
pause_version() {
  local dir; dir=$(cd "$here/tools/k8s" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  sed -nE 's/^[[:space:]]*PauseVersion = "([^"]+)"/\1/p' "$dir/cmd/kubeadm/app/constants/constants.go"
}

# The two commands of scheduler-plugins' Makefile (build-scheduler, build-controller).
build_scheduler_plugins() {
  cd "$here/tools/scheduler-plugins"
  go build -trimpath -ldflags "$scheduler_plugins_ldflags" -o "$OUT/kube-scheduler" \
    sigs.k8s.io/scheduler-plugins/cmd/scheduler
  go build -trimpath -ldflags "$scheduler_plugins_ldflags" -o "$OUT/controller" \
    sigs.k8s.io/scheduler-plugins/cmd/controller
}

# Two of the commands of Volcano's Makefile (vc-scheduler, vc-controller-manager), named as it names them,
# CGO off as its default build has it (SUPPORT_PLUGINS=no).
build_volcano() {
  cd "$here/tools/volcano"
  go build -trimpath -ldflags "$volcano_ldflags" -o "$OUT/vc-scheduler" volcano.sh/volcano/cmd/scheduler
  go build -trimpath -ldflags "$volcano_ldflags" -o "$OUT/vc-controller-manager" \
    volcano.sh/volcano/cmd/controller-manager
}

build_gotypes() {  # this repository's own tool, from the same pinned modules as upstream's controller
  cd "$here/tools/gotypes"
  go build -trimpath -ldflags "-s -w" -o "$OUT/gotypes" .
}

all_components="etcd kubernetes kwok jobset helm kueue trainer upstream-render kind kubernetes-node coredns crictl pause"
all_components+=" upstream-e2e kueue-e2e agnhost gotypes scheduler-plugins"
# Built only when named: the kind tier's opt-in Volcano (VOLCANO=1 for hack/e2e-setup-kind.sh).
optional_components="volcano"
# Components named on the command line, or all of them.
only=" ${*:-$all_components} "
for n in "$@"; do
  [[ " $all_components $optional_components " == *" $n "* ]] || die "unknown component $n"
done
wanted() { [[ $only == *" $1 "* ]]; }

need=()
wanted etcd && ! complete "$etcd_dir" etcd && need+=(etcd)
wanted kubernetes && ! complete "$k8s_dir" kube-apiserver kube-controller-manager kube-scheduler kubectl &&
  need+=(kubernetes)
wanted kwok && ! complete "$kwok_dir" kwok kwokctl && need+=(kwok)
wanted jobset && ! complete "$jobset_dir" jobset && need+=(jobset)
wanted helm && ! complete "$helm_dir" helm && need+=(helm)
wanted kueue && ! complete "$kueue_dir" kueue && need+=(kueue)
wanted trainer && ! complete "$trainer_dir" trainer-controller-manager && need+=(trainer)
wanted upstream-render && ! complete "$upstream_render_dir" upstream-render && need+=(upstream-render)
wanted kind && ! complete "$kind_dir" kind && need+=(kind)
wanted kubernetes-node && ! complete "$k8s_node_dir" kubelet kubeadm kube-proxy && need+=(kubernetes-node)
wanted coredns && ! complete "$coredns_dir" coredns && need+=(coredns)
wanted crictl && ! complete "$crictl_dir" crictl && need+=(crictl)
wanted pause && ! complete "$pause_dir" pause && need+=(pause)
wanted upstream-e2e && ! complete "$upstream_e2e_dir" e2e.test && need+=(upstream-e2e)
wanted kueue-e2e && ! complete "$kueue_e2e_dir" e2e.test && need+=(kueue-e2e)
wanted agnhost && ! complete "$agnhost_dir" agnhost && need+=(agnhost)
wanted gotypes && ! complete "$gotypes_dir" gotypes && need+=(gotypes)
wanted scheduler-plugins && ! complete "$scheduler_plugins_dir" kube-scheduler controller && need+=(scheduler-plugins)
wanted volcano && ! complete "$volcano_dir" vc-scheduler vc-controller-manager && need+=(volcano)

if (( ${#need[@]} )); then
  preflight
  for n in "${need[@]}"; do
    case $n in
      etcd) build etcd "$etcd_dir" build_etcd ;;
      kubernetes) build kubernetes "$k8s_dir" build_kubernetes ;;
      kwok) build kwok "$kwok_dir" build_kwok ;;
      jobset) build jobset "$jobset_dir" build_jobset ;;
      helm) build helm "$helm_dir" build_helm ;;
      kueue) build kueue "$kueue_dir" build_kueue ;;
      trainer) build trainer "$trainer_dir" build_trainer ;;
      upstream-render) build upstream-render "$upstream_render_dir" build_upstream_render ;;
      kind) build kind "$kind_dir" build_kind ;;
      kubernetes-node) build kubernetes-node "$k8s_node_dir" build_kubernetes_node ;;
      coredns) build coredns "$coredns_dir" build_coredns ;;
      crictl) build crictl "$crictl_dir" build_crictl ;;
      pause) build pause "$pause_dir" build_pause ;;
      upstream-e2e) build upstream-e2e "$upstream_e2e_dir" build_upstream_e2e ;;
      kueue-e2e) build kueue-e2e "$kueue_e2e_dir" build_kueue_e2e ;;
      agnhost) build agnhost "$agnhost_dir" build_agnhost ;;
      gotypes) build gotypes "$gotypes_dir" build_gotypes ;;
      scheduler-plugins) build scheduler-plugins "$scheduler_plugins_dir" build_scheduler_plugins ;;
      volcano) build volcano "$volcano_dir" build_volcano ;;
    esac
  done
fi
print_dirs
