#!/usr/bin/env bash
# A kind cluster for test/e2e, for developers who have Docker (or Podman). The default e2e cluster is the
# kwok one (hack/cluster.py), which needs neither; this one runs real containers on real kubelets.
#
#   hack/e2e-setup-kind.sh          create the cluster (or reuse it), install JobSet, write the kubeconfig
#   hack/e2e-setup-kind.sh --down   delete the cluster and its kubeconfig
#
# Then run the same suite against it (the script prints these lines):
#   export KUBECONFIG=$ARTIFACTS/kubeconfig E2E_CLUSTER=kind
#   make e2e
#
# Environment:
#   KIND_CLUSTER_NAME  cluster name (default trainer-e2e-kind)
#   ARTIFACTS          where the kubeconfig (and, after a failure, `kind export logs`) go
#                      (default <cache>/kind/<name>; <cache> as in hack/build-binaries.sh)
#   KIND_VERSION       kind release, installed with `go install sigs.k8s.io/kind@$KIND_VERSION` into
#                      <cache>/bin/kind-<version>/ (default v0.33.0)
#   KIND_NODE_IMAGE    node image (default kindest/node:$KUBERNETES_VERSION from hack/versions.env; if
#                      that kind release publishes no image for it, pick one from its release notes)
#   KIND_EXPERIMENTAL_PROVIDER=podman  is passed through to kind
#
# Needs Docker or Podman, Go (to install kind), and network access to the image registries and to
# JobSet's GitHub release (its manifest is applied as upstream does: internal certificate management,
# webhooks behind an in-cluster Service). Not run in this project's CI, which has no container engine.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${TRAINER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeflow-trainer-py}

KIND_VERSION=${KIND_VERSION:-v0.33.0}
name=${KIND_CLUSTER_NAME:-trainer-e2e-kind}
artifacts=${ARTIFACTS:-$cache/kind/$name}
image=${KIND_NODE_IMAGE:-kindest/node:$KUBERNETES_VERSION}
kind_dir="$cache/bin/kind-$KIND_VERSION"
kind="$kind_dir/kind"
kubeconfig="$artifacts/kubeconfig"
jobset_manifest="https://github.com/kubernetes-sigs/jobset/releases/download/$JOBSET_VERSION/manifests.yaml"

die() { echo "e2e-setup-kind: error: $*" >&2; exit 1; }
say() { echo "e2e-setup-kind: $*" >&2; }

# Prefer the kubectl that matches the pinned Kubernetes version, if hack/build-binaries.sh built it.
kubectl="$cache/bin/kubernetes-$KUBERNETES_VERSION/kubectl"
if [[ ! -x "$kubectl" ]]; then
  kubectl=$(command -v kubectl) || die "kubectl not found (run \`make binaries\` or install kubectl)"
fi

ensure_kind() {
  [[ -x "$kind" ]] && return 0
  command -v go >/dev/null 2>&1 || die "Go is not installed; it is needed to install kind $KIND_VERSION"
  say "installing kind $KIND_VERSION into $kind_dir"
  mkdir -p "$kind_dir"
  GOBIN="$kind_dir" GOFLAGS= go install "sigs.k8s.io/kind@$KIND_VERSION" || die "go install sigs.k8s.io/kind@$KIND_VERSION failed"
}

cluster_exists() { "$kind" get clusters 2>/dev/null | grep -qx "$name"; }

if [[ "${1:-}" == "--down" ]]; then
  if [[ -x "$kind" ]] && cluster_exists; then
    "$kind" delete cluster --name "$name" --kubeconfig "$kubeconfig"
  fi
  rm -f "$kubeconfig"
  say "cluster $name is gone"
  exit 0
fi
[[ $# -eq 0 ]] || die "unknown argument: $1 (usage: $0 [--down])"

engine=${KIND_EXPERIMENTAL_PROVIDER:-docker}
command -v "$engine" >/dev/null 2>&1 || die "$engine is not installed; kind needs a container engine (use \`make e2e\` without E2E_CLUSTER for the kwok cluster)"
"$engine" info >/dev/null 2>&1 || die "the $engine engine is not reachable (is the daemon running?)"

ensure_kind
mkdir -p "$artifacts"

on_failure() {
  say "set-up failed; exporting logs to $artifacts/logs (delete the cluster with: $0 --down)"
  "$kind" export logs "$artifacts/logs" --name "$name" >/dev/null 2>&1 || true
}
trap on_failure ERR

if cluster_exists; then
  say "reusing cluster $name"
  "$kind" export kubeconfig --name "$name" --kubeconfig "$kubeconfig"
else
  say "creating cluster $name ($image)"
  "$kind" create cluster --name "$name" --image "$image" --kubeconfig "$kubeconfig" --wait 2m
fi
export KUBECONFIG="$kubeconfig"

say "installing JobSet $JOBSET_VERSION"
# Server-side: the JobSet CRD is too large for the last-applied annotation of a client-side apply.
"$kubectl" apply --server-side --force-conflicts -f "$jobset_manifest"
"$kubectl" -n jobset-system wait deployment/jobset-controller-manager --for=condition=Available --timeout=5m
# Ready means JobSet's certificates are in place and its webhook server is listening; a JobSet created
# before that would be rejected by the webhook (failurePolicy: Fail).
"$kubectl" -n jobset-system wait pods --all --for=condition=Ready --timeout=5m

trap - ERR
say "cluster $name is ready"
echo "export KUBECONFIG=$kubeconfig"
echo "export E2E_CLUSTER=kind"
