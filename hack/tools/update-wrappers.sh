#!/usr/bin/env bash
# Regenerate the wrapper modules in hack/tools/ after a version bump in hack/versions.env.
# Run by a maintainer, never by CI: the resulting go.mod/go.sum files are committed.
#
# Why wrappers: k8s.io/kubernetes replaces every staging module with a local path,
# so `go install k8s.io/kubernetes/cmd/...@v` is refused; a wrapper requires it and
# points each staging module at its published v0.Y.Z. etcd's server module has replace
# directives too. kwok, jobset, helm, kueue and trainer need none, but a wrapper pins their go.sum here as well.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../versions.env"
export GOFLAGS=-mod=mod

fresh() {  # fresh DIR MODULE: start a wrapper module from scratch
  rm -f "$1/go.mod" "$1/go.sum"
  (cd "$1" && go mod init "$2" >/dev/null 2>&1 && go mod edit -go=1.26.0)
}

# Kubernetes: require k8s.io/kubernetes and replace each staging module by v0.Y.Z.
staging="v0.${KUBERNETES_VERSION#v1.}"
fresh "$here/k8s" github.com/kubeflow-trainer-py/hack/tools/k8s
gomod=$(cd "$(mktemp -d)" && GOFLAGS= go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
cd "$here/k8s"
for m in $(sed -nE 's#^[[:space:]]*(k8s\.io/[^[:space:]]+)[[:space:]]+=>[[:space:]]+\./staging/src/.*#\1#p' "$gomod"); do
  go mod edit -replace="$m=$m@$staging"
done
go mod edit -require="k8s.io/kubernetes@$KUBERNETES_VERSION" \
  -tool=k8s.io/kubernetes/cmd/kube-apiserver -tool=k8s.io/kubernetes/cmd/kube-controller-manager \
  -tool=k8s.io/kubernetes/cmd/kube-scheduler -tool=k8s.io/kubernetes/cmd/kubectl
go mod tidy

# agnhost (Kueue's e2e specs run it): the Kubernetes wrapper's replacements, agnhost as the only tool.
fresh "$here/agnhost" github.com/kubeflow-trainer-py/hack/tools/agnhost
cp "$here/k8s/go.mod" "$here/agnhost/go.mod"
cd "$here/agnhost"
go mod edit -module=github.com/kubeflow-trainer-py/hack/tools/agnhost -droptool=k8s.io/kubernetes/cmd/kube-apiserver \
  -droptool=k8s.io/kubernetes/cmd/kube-controller-manager -droptool=k8s.io/kubernetes/cmd/kube-scheduler \
  -droptool=k8s.io/kubernetes/cmd/kubectl -droptool=k8s.io/kubernetes/cmd/kubelet \
  -droptool=k8s.io/kubernetes/cmd/kubeadm -droptool=k8s.io/kubernetes/cmd/kube-proxy \
  -tool=k8s.io/kubernetes/test/images/agnhost
go mod tidy

fresh "$here/etcd" github.com/kubeflow-trainer-py/hack/tools/etcd
cd "$here/etcd" && go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION" && go mod tidy

fresh "$here/kwok" github.com/kubeflow-trainer-py/hack/tools/kwok
cd "$here/kwok" && go get -tool "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION" && go mod tidy

fresh "$here/jobset" github.com/kubeflow-trainer-py/hack/tools/jobset
cd "$here/jobset" && go get -tool "sigs.k8s.io/jobset@$JOBSET_VERSION" && go mod tidy

# helm: only the helm command is built (hack/build-binaries.sh); the wrapper pins its go.sum.
fresh "$here/helm" github.com/kubeflow-trainer-py/hack/tools/helm
cd "$here/helm" && go get -tool "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" && go mod tidy

# Kueue: its manager (cmd/kueue), run on the host for the e2e tests of the TrainJob integration.
fresh "$here/kueue" github.com/kubeflow-trainer-py/hack/tools/kueue
cd "$here/kueue" && go get -tool "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" && go mod tidy

# Upstream Kubeflow Trainer's controller manager: the baseline of the benchmarks and take-over tests.
# Its go.mod has no replace directives, so the wrapper only pins the go.sum.
fresh "$here/trainer" github.com/kubeflow-trainer-py/hack/tools/trainer
cd "$here/trainer" && go get -tool "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager@$TRAINER_VERSION" && go mod tidy

# upstream-render: our own main.go (kept) over upstream's packages, at the versions the trainer wrapper just
# pinned, so both share the Go build cache.
cd "$here/upstream-render" && rm -f go.mod go.sum && go mod init github.com/kubeflow-trainer-py/hack/tools/upstream-render >/dev/null 2>&1 &&
  go mod edit -go=1.26.0 && cp "$here/trainer/go.sum" go.sum &&
  sed -n '/^require (/,/^)/p' "$here/trainer/go.mod" | sed 's# // indirect##' >> go.mod && go mod tidy

# copy_replaces MODULE@VERSION: give the wrapper in the current directory the replace directives of that
# module's go.mod (those of a dependency do not apply; scheduler-plugins and Volcano replace the Kubernetes
# staging modules, as k8s.io/kubernetes does). Some of those versions are refused by the Go module proxy
# ("This module version is not available", e.g. k8s.io/csi-translation-lib v0.34.7): each such replacement
# takes the nearest patch release of the same minor that the proxy serves (one below first, then one
# above, and so on); a module with none (e.g. k8s.io/legacy-cloud-providers) loses its replace.
served() { (cd "$(mktemp -d)" && GOFLAGS='' go mod download "$1" >/dev/null 2>&1); }
nearest_served() {  # nearest_served MODULE vX.Y.Z: the served version of the same minor nearest Z, or nothing
  local m=$1 v=$2 base=${2%.*} z=${2##*.} d
  served "$m@$v" && { echo "$v"; return; }
  for d in 1 2 3 4 5 6 7 8; do
    (( z - d >= 0 )) && served "$m@$base.$((z - d))" && { echo "$base.$((z - d))"; return; }
    served "$m@$base.$((z + d))" && { echo "$base.$((z + d))"; return; }
  done
}
copy_replaces() {
  local gomod r new v
  gomod=$(cd "$(mktemp -d)" && GOFLAGS='' go mod download -json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  for r in $(go mod edit -json "$gomod" | python3 -c 'import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    print("{}={}@{}".format(r["Old"]["Path"], r["New"]["Path"], r["New"]["Version"]))'); do
    new=${r#*=}
    v=$(nearest_served "${new%@*}" "${new#*@}")
    if [[ -z $v ]]; then echo "$1: no version of ${new%@*} is served; dropping its replace"; continue; fi
    [[ $v == "${new#*@}" ]] || echo "$1: ${new%@*} ${new#*@} is not served; using $v"
    go mod edit -replace="${r%%=*}=${new%@*}@$v"
  done
}

# scheduler-plugins: its scheduler (kube-scheduler with the Coscheduling plugin) and its PodGroup controller,
# run as a second scheduler in the kind tier.
fresh "$here/scheduler-plugins" github.com/kubeflow-trainer-py/hack/tools/scheduler-plugins
cd "$here/scheduler-plugins"
copy_replaces "sigs.k8s.io/scheduler-plugins@$SCHEDULER_PLUGINS_VERSION"
go mod edit -require="sigs.k8s.io/scheduler-plugins@$SCHEDULER_PLUGINS_VERSION" \
  -tool=sigs.k8s.io/scheduler-plugins/cmd/scheduler -tool=sigs.k8s.io/scheduler-plugins/cmd/controller
go mod tidy

# Volcano: its scheduler, controller manager and webhook manager, tried in the kind tier as the other gang
# scheduler (docs/development.md says how far that got).
fresh "$here/volcano" github.com/kubeflow-trainer-py/hack/tools/volcano
cd "$here/volcano"
copy_replaces "volcano.sh/volcano@$VOLCANO_VERSION"
go mod edit -require="volcano.sh/volcano@$VOLCANO_VERSION" -tool=volcano.sh/volcano/cmd/scheduler \
  -tool=volcano.sh/volcano/cmd/controller-manager -tool=volcano.sh/volcano/cmd/webhook-manager
go mod tidy

# Third-party CRDs are read from the module cache at run time; a go.mod here records
# the versions so `go mod download` fetches exactly these.
fresh "$here/crds" github.com/kubeflow-trainer-py/hack/tools/crds
cd "$here/crds"
go mod edit -require="sigs.k8s.io/scheduler-plugins@$SCHEDULER_PLUGINS_VERSION" -require="volcano.sh/volcano@$VOLCANO_VERSION" \
  -require="sigs.k8s.io/jobset@$JOBSET_VERSION" -require="github.com/kubeflow/trainer/v2@$TRAINER_VERSION"
echo "wrappers regenerated; commit hack/tools/*/go.mod and go.sum"

# upstream-e2e: deps.go (kept) names what upstream's test/e2e imports; the requirements start from the trainer
# wrapper's, so `go mod tidy` adds only the suite's own (Ginkgo, Gomega, at the versions upstream requires).
cd "$here/upstream-e2e" && rm -f go.mod go.sum && go mod init github.com/kubeflow-trainer-py/hack/tools/upstream-e2e >/dev/null 2>&1 &&
  go mod edit -go=1.26.0 && cp "$here/trainer/go.sum" go.sum &&
  sed -n '/^require (/,/^)/p' "$here/trainer/go.mod" | sed 's# // indirect##' >> go.mod && go mod tidy

# kueue-e2e: deps.go (kept; update its list when Kueue's test/e2e/singlecluster imports change) names what
# Kueue's suite imports; requiring the Kueue release, `go mod tidy` pins them at the versions Kueue requires.
fresh "$here/kueue-e2e" github.com/kubeflow-trainer-py/hack/tools/kueue-e2e
cd "$here/kueue-e2e" && go mod edit -require="sigs.k8s.io/kueue@$KUEUE_VERSION" && go mod tidy
