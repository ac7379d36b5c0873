#!/usr/bin/env bash
# The e2e suite on kind, for developers who have Docker (or Podman). The default e2e cluster is the kwok one
# (hack/cluster.py, `make test`), which needs neither; this path runs the manager as users do: the image built
# from Dockerfile, installed by config/default, real kubelets running real containers.
#
#   hack/e2e-setup-kind.sh            build the image, create (or reuse) the cluster, install JobSet and the
#                                     Trainer, wait until it serves, then run test/e2e against it
#   hack/e2e-setup-kind.sh --no-test  the same without the test run (prints the exports to run it yourself)
#   hack/e2e-setup-kind.sh --down     delete the cluster and its kubeconfig
#
# Steps:
#   1. `<engine> build` the manager image (TRAINER_IMAGE) from the repository's Dockerfile;
#   2. `kind create cluster` (reused when it exists) and load the image into its nodes (`<engine> save`, then
#      `kind load image-archive`, which works for Docker and Podman alike);
#   3. JobSet $JOBSET_VERSION from its release manifest (hack/versions.env), server-side;
#   4. the Trainer: `kubectl apply --server-side -k` an overlay of config/default whose only change is the
#      image (kustomize `images:`), then config/runtimes once the CRDs are established;
#   5. wait: JobSet's Deployment Available and its webhook pod Ready, our Deployment Available, then our
#      validating webhook answering through its Service (hack/e2e_paths.py wait-serving, the same check the
#      suite's fixture makes);
#   6. `pytest test/e2e` with E2E_CLUSTER=kind and KUBECONFIG set. Tests that rely on kwok's pod stages skip
#      themselves on kind; what differs between the kwok and kind paths is kept in hack/e2e_paths.py.
#
# Environment:
#   KIND_CLUSTER_NAME  cluster name (default trainer-e2e-kind)
#   ARTIFACTS          where the kubeconfig, the overlay, the image archive and (after a failure) `kind export
#                      logs` go (default <cache>/kind/<name>; <cache> as in hack/build-binaries.sh)
#   TRAINER_IMAGE      the manager image to build and load (default kubeflow-trainer-py:e2e; not `latest`,
#                      so the kubelet uses the loaded image instead of pulling)
#   KIND_VERSION       kind release, installed with `go install sigs.k8s.io/kind@$KIND_VERSION` into
#                      <cache>/bin/kind-<version>/ (default v0.33.0)
#   KIND_NODE_IMAGE    node image (default kindest/node:$KUBERNETES_VERSION from hack/versions.env; if that kind
#                      release publishes no image for it, pick one from its release notes)
#   KIND_EXPERIMENTAL_PROVIDER=podman  is passed through to kind, and selects podman for the build
#   PYTEST_ARGS        extra pytest arguments for step 6, e.g. "-k webhook -x"
#   TRAINER_SERVING_TIMEOUT  seconds step 5 waits for our webhook to answer (default 300)
#
# Needs Docker or Podman, Go (to install kind; the suite also reads the scheduler-plugins PodGroup CRD from the
# Go module cache), Python >= 3.11 (`make venv`), and network access to the image registries, to PyPI for the
# image build and to JobSet's GitHub release. Not run in this project's CI, which has no container engine.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=SCRIPTDIR/versions.env
source "$here/versions.env"
cache=${TRAINER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeflow-trainer-py}

KIND_VERSION=${KIND_VERSION:-v0.33.0}
name=${KIND_CLUSTER_NAME:-trainer-e2e-kind}
artifacts=${ARTIFACTS:-$cache/kind/$name}
node_image=${KIND_NODE_IMAGE:-kindest/node:$KUBERNETES_VERSION}
trainer_image=${TRAINER_IMAGE:-kubeflow-trainer-py:e2e}
[[ ${trainer_image##*:} != "$trainer_image" && ${trainer_image##*:} != */* && ${trainer_image##*:} != latest ]] \
  || { echo "e2e-setup-kind: error: TRAINER_IMAGE must be <name>:<tag> with a tag other than latest" >&2; exit 1; }
kind_dir="$cache/bin/kind-$KIND_VERSION"
kind="$kind_dir/kind"
kubeconfig="$artifacts/kubeconfig"
python="$repo/.venv/bin/python"
jobset_manifest="https://github.com/kubernetes-sigs/jobset/releases/download/$JOBSET_VERSION/manifests.yaml"
# Names of what config/default installs (config/manager/, config/crd/); hack/e2e_paths.py has the same.
manager_namespace=kubeflow-system
manager_deployment=kubeflow-trainer-controller-manager
placeholder_image=ghcr.io/example/kubeflow-trainer-py

# Everything below writes progress to stderr; stdout carries only the exports of --no-test, for eval.
exec 3>&1 1>&2

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
  GOBIN="$kind_dir" GOFLAGS='' go install "sigs.k8s.io/kind@$KIND_VERSION" \
    || die "go install sigs.k8s.io/kind@$KIND_VERSION failed"
}

cluster_exists() { "$kind" get clusters 2>/dev/null | grep -qx "$name"; }

run_tests=1
case "${1:-}" in
  --down)
    if [[ -x "$kind" ]] && cluster_exists; then
      "$kind" delete cluster --name "$name" --kubeconfig "$kubeconfig"
    fi
    rm -f "$kubeconfig"
    say "cluster $name is gone"
    exit 0
    ;;
  --no-test) run_tests=0 ;;
  "") ;;
  *) die "unknown argument: $1 (usage: $0 [--no-test | --down])" ;;
esac
[[ $# -le 1 ]] || die "one argument at most (usage: $0 [--no-test | --down])"

engine=${KIND_EXPERIMENTAL_PROVIDER:-docker}
command -v "$engine" >/dev/null 2>&1 \
  || die "$engine is not installed; kind needs a container engine (\`make test\` runs the e2e suite on kwok without one)"
"$engine" info >/dev/null 2>&1 || die "the $engine engine is not reachable (is the daemon running?)"

say "preparing the virtualenv (make venv)"
make -C "$repo" --no-print-directory venv
ensure_kind
mkdir -p "$artifacts"

on_failure() {
  say "set-up failed; exporting logs to $artifacts/logs (delete the cluster with: $0 --down)"
  "$kind" export logs "$artifacts/logs" --name "$name" >/dev/null 2>&1 || true
}
trap on_failure ERR

# 1. The manager image.
say "building $trainer_image from $repo/Dockerfile"
"$engine" build --tag "$trainer_image" "$repo"

# 2. The cluster, with the image loaded into every node.
if cluster_exists; then
  say "reusing cluster $name"
  "$kind" export kubeconfig --name "$name" --kubeconfig "$kubeconfig"
else
  say "creating cluster $name ($node_image)"
  "$kind" create cluster --name "$name" --image "$node_image" --kubeconfig "$kubeconfig" --wait 2m
fi
export KUBECONFIG="$kubeconfig"
say "loading $trainer_image into the nodes"
"$engine" save --output "$artifacts/trainer-image.tar" "$trainer_image"
"$kind" load image-archive "$artifacts/trainer-image.tar" --name "$name"
rm -f "$artifacts/trainer-image.tar"

# 3. JobSet, from its release manifest (internal certificates, webhooks behind its Service), as upstream does.
say "installing JobSet $JOBSET_VERSION"
# Server-side: the JobSet CRD is too large for the last-applied annotation of a client-side apply.
"$kubectl" apply --server-side --force-conflicts -f "$jobset_manifest"

# 4. The Trainer: config/default with the image replaced, through a kustomize overlay of our own. kustomize
# refuses an absolute path to the base, so the overlay names it relative to itself.
overlay="$artifacts/overlay"
mkdir -p "$overlay"
base=$("$python" -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$repo/config/default" "$overlay")
cat >"$overlay/kustomization.yaml" <<EOF
# Written by hack/e2e-setup-kind.sh: config/default running the image built for this cluster.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $base
images:
  - name: $placeholder_image
    newName: ${trainer_image%:*}
    newTag: ${trainer_image##*:}
EOF
say "installing the Trainer (config/default, image $trainer_image)"
"$kubectl" apply --server-side --force-conflicts -k "$overlay"
"$kubectl" wait --for=condition=Established --timeout=2m \
  crd/trainjobs.trainer.kubeflow.org crd/trainingruntimes.trainer.kubeflow.org \
  crd/clustertrainingruntimes.trainer.kubeflow.org
"$kubectl" apply --server-side --force-conflicts -k "$repo/config/runtimes"

# 5. Readiness. Ready JobSet pods mean its certificates are in place and its webhook server listens: a JobSet
# created before that is refused by its webhook (failurePolicy: Fail), and so would our first TrainJob be.
say "waiting for JobSet and the Trainer manager"
"$kubectl" -n jobset-system wait deployment/jobset-controller-manager --for=condition=Available --timeout=5m
"$kubectl" -n jobset-system wait pods --all --for=condition=Ready --timeout=5m
# A new image under the same tag needs new pods; a no-op on a fresh install.
"$kubectl" -n "$manager_namespace" rollout restart "deployment/$manager_deployment"
"$kubectl" -n "$manager_namespace" rollout status "deployment/$manager_deployment" --timeout=5m
"$python" "$here/e2e_paths.py" wait-serving --flavour kind --kubeconfig "$kubeconfig" \
  --timeout "${TRAINER_SERVING_TIMEOUT:-300}"

trap - ERR
say "cluster $name is ready; the manager's log: $kubectl -n $manager_namespace logs deployment/$manager_deployment"
if [[ $run_tests -eq 0 ]]; then
  echo "export KUBECONFIG=$kubeconfig" >&3
  echo "export E2E_CLUSTER=kind" >&3
  exit 0
fi

# 6. The same suite as on kwok, its report on stdout.
say "running test/e2e against $name"
exec 1>&3
cd "$repo"
# shellcheck disable=SC2086 # PYTEST_ARGS is a list of arguments, split on purpose
E2E_CLUSTER=kind KUBECONFIG="$kubeconfig" "$python" -m pytest test/e2e ${PYTEST_ARGS:-}
