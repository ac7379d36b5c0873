#!/usr/bin/env bash
# The e2e suite on kind: real kubelets running real containers, the manager installed as users install it.
# Nothing is pulled from a registry: kind, the node image, JobSet's image, the manager's image (from the
# Dockerfile) and the training Pods' image are built here (hack/build-binaries.sh, hack/build-images.sh).
#
#   hack/e2e-setup-kind.sh up         engine, binaries, images, cluster, JobSet, the Trainer by Helm; wait
#                                     until it serves, then print the exports that point the suite at it
#   hack/e2e-setup-kind.sh test       `up`, then test/e2e against the cluster (E2E_CLUSTER=kind)
#   hack/e2e-setup-kind.sh ci         what `make test` runs: a new cluster; the Trainer installed by kustomize,
#                                     one TrainJob on real Pods and the example plugin's test (its effect
#                                     absent); then uninstalled, installed by Helm (the plugin and the
#                                     TrainJobStatus gate on), and the whole suite; the cluster is deleted
#                                     at the end, pass or fail
#   hack/e2e-setup-kind.sh down       delete the cluster and its kubeconfig
#
# Steps of `up`:
#   1. a Docker engine (hack/docker-engine.sh installs and starts one where none answers);
#   2. the binaries and images, cached by version (a second run builds nothing);
#   3. `kind create cluster` from the node image: a control plane and KIND_WORKERS workers. The control
#      plane keeps kubeadm's NoSchedule taint (kind removes it only from a cluster without workers), so
#      every Pod of the suite runs on a worker. The Pod network is podnet (hack/kind/podnet/podnet.py, a
#      DaemonSet that kind applies as its default CNI): each node's bridge CNI configuration on its
#      spec.podCIDR, a route to every other node's podCIDR through that node's address, masquerade only
#      for traffic that leaves the Pod network. Reused when a healthy one of the same image and node count
#      exists, recreated when it is stale (a node stopped or missing, another image, no API); then every
#      node Ready;
#   4. `kind load` into the workers the manager (plain and with the example plugin), JobSet, workload,
#      Prometheus and example images, the stand-ins of the images upstream's e2e suite runs
#      (test/e2e/upstream/README.md), Kueue's and agnhost's (the program in the pods of Kueue's e2e
#      specs), and scheduler-plugins' scheduler and controller (and Volcano's two, with VOLCANO=1);
#   5. JobSet $JOBSET_VERSION from its own manifests (config/default of its Go module) with the image built
#      here, server-side;
#   5b. scheduler-plugins $SCHEDULER_PLUGINS_VERSION as a second scheduler (install_scheduler_plugins): the
#      CRDs of its default plugins and its Helm chart manifests/install/charts/as-a-second-scheduler, both
#      from its Go module, with the images built here (the chart's only change); before the Trainer, whose
#      manager watches PodGroups only when their CRD exists as it starts;
#   5c. with VOLCANO=1, Volcano $VOLCANO_VERSION (install_volcano): its Helm chart installer/helm/chart/volcano
#      from its Go module (its CRDs are templates of the chart), with the scheduler and controller manager
#      images built here and, as values, what a cluster without a registry or Volcano's webhook image needs:
#      no pull (IfNotPresent) and no admission webhooks (custom.admission_enable=false); then its default
#      queue, which the scheduler creates as it starts;
#   6. the Trainer: INSTALL=helm (default: charts/kubeflow-trainer-py, as docs/helm.md tells users) or
#      INSTALL=kustomize (`kubectl apply --server-side -k` an overlay of config/default that sets only the
#      image, then config/runtimes, as docs/install.md tells users). The Helm install runs the manager image
#      with the example third-party plugin installed (PLUGIN_IMAGE, test/plugins/example_plugin), enables it
#      by name (manager.config.plugins.enabled) and turns the TrainJobStatus feature gate on
#      (manager.config.featureGates, as upstream's e2e set-up installs its own), as docs/plugins.md and
#      docs/status-server.md tell users; the kustomize
#      install runs the plain manager image with the shipped Configuration;
#   7. wait: JobSet's Pods Ready, our Deployment Available, our validating webhook answering through its
#      Service (hack/e2e_paths.py wait-serving, the check the suite's fixture makes);
#   8. Kueue $KUEUE_VERSION from its own manifests (config/default of its Go module) with the image built
#      here, through an overlay (hack/e2e_paths.py kueue-overlay, test/support/kueue.py) that sets only the
#      image, the integrations of its Configuration (KUEUE_INTEGRATIONS), its CPU request and an object
#      selector on its job webhooks; then wait for its Deployment and its webhook (wait-kueue).
#
# Environment:
#   KIND_CLUSTER_NAME  cluster name (default trainer-e2e-kind)
#   KIND_API_PORT      host port of the API server on 127.0.0.1 (default: a free one)
#   KIND_WORKERS       worker nodes besides the control plane (default 2; at least 2, for Pods of one
#                      TrainJob on two nodes)
#   ARTIFACTS          kubeconfig, overlays and (after a failure) `kind export logs` (default <cache>/kind/<name>)
#   INSTALL            helm or kustomize (step 6; default helm)
#   MANAGER_REPLICAS   replicas of our Deployment (default 2: leader election is exercised)
#   PYTEST_ARGS        extra pytest arguments for `test`, e.g. "-k allreduce -x"
#   TRAINER_SERVING_TIMEOUT  seconds step 7 waits for our webhook to answer (default 300)
#   KUEUE_INTEGRATIONS  Kueue's integrations.frameworks, comma-separated (step 8; default
#                      trainer.kubeflow.org/trainjob, Kueue's TrainJob integration)
#   VOLCANO            1: also build and install Volcano (step 5c) and run the gang tests against it (default
#                      0: about 6 minutes more cold, past the kind tier's budget; docs/development.md)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=SCRIPTDIR/versions.env
source "$here/versions.env"
cache=${TRAINER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeflow-trainer-py}

name=${KIND_CLUSTER_NAME:-trainer-e2e-kind}
artifacts=${ARTIFACTS:-$cache/kind/$name}
kubeconfig="$artifacts/kubeconfig"
python="$repo/.venv/bin/python"
install=${INSTALL:-helm}
workers=${KIND_WORKERS:-2}
replicas=${MANAGER_REPLICAS:-2}
volcano=${VOLCANO:-0}
# Names of what config/default and the chart install (config/manager/); test/support/e2e_paths.py has the same.
manager_namespace=kubeflow-system
manager_deployment=kubeflow-trainer-controller-manager
placeholder_image=ghcr.io/example/kubeflow-trainer-py
release=kubeflow-trainer

# Progress goes to stderr; stdout carries only the exports of `up`, for eval.
exec 3>&1 1>&2

die() { echo "e2e-setup-kind: error: $*" >&2; exit 1; }
say() { echo "e2e-setup-kind: $*" >&2; }

usage="usage: $0 up | test | ci | down"
[[ $# -eq 1 ]] || die "$usage"
action=$1
case $action in up|test|ci|down) ;; *) die "unknown action $action ($usage)" ;; esac
case $install in helm|kustomize) ;; *) die "INSTALL must be helm or kustomize, not $install" ;; esac
if [[ ! $workers =~ ^[0-9]+$ ]] || (( workers < 2 )); then die "KIND_WORKERS must be a number >= 2, not $workers"; fi
case $volcano in 0|1) ;; *) die "VOLCANO must be 0 or 1, not $volcano" ;; esac

bins=$(bash "$here/build-binaries.sh" --print)
eval "$bins"
kind="$KIND_BIN/kind"
kubectl="$KUBERNETES_BIN/kubectl"
helm="$HELM_BIN/helm"

cluster_exists() { [[ -x "$kind" ]] && "$kind" get clusters 2>/dev/null | grep -qx "$name"; }
# The nodes' container names, as kind names them: <name>-control-plane, <name>-worker, <name>-worker2, ...
worker_nodes() { local i; for ((i = 1; i <= workers; i++)); do echo "$name-worker$( ((i > 1)) && echo "$i")"; done; }
all_nodes() { echo "$name-control-plane"; worker_nodes; }

if [[ $action == down ]]; then
  if docker info >/dev/null 2>&1 && cluster_exists; then
    "$kind" delete cluster --name "$name" --kubeconfig "$kubeconfig"
  fi
  rm -f "$kubeconfig"
  say "cluster $name is gone"
  exit 0
fi

# 1, 2: engine, binaries, images.
bash "$here/docker-engine.sh"
say "preparing the virtualenv (make venv)"
make -C "$repo" --no-print-directory venv >/dev/null
bash "$here/build-binaries.sh" etcd kubernetes jobset helm kind kubernetes-node coredns crictl pause \
  upstream-e2e kueue agnhost kueue-e2e scheduler-plugins >/dev/null
bash "$here/build-images.sh"
if [[ $volcano == 1 ]]; then
  bash "$here/build-binaries.sh" volcano >/dev/null
  bash "$here/build-images.sh" volcano
fi
eval "$(bash "$here/build-images.sh" --print)"
volcano_images=()
[[ $volcano == 0 ]] || volcano_images=("$VOLCANO_SCHEDULER_IMAGE" "$VOLCANO_CONTROLLER_IMAGE")
mkdir -p "$artifacts"

on_failure() {
  say "set-up failed; exporting logs to $artifacts/logs (delete the cluster with: $0 down)"
  "$kind" export logs "$artifacts/logs" --name "$name" >/dev/null 2>&1 || true
}
trap on_failure ERR

if [[ $action == ci ]] && cluster_exists; then
  say "ci: deleting the existing cluster $name, to start from a new one"
  "$kind" delete cluster --name "$name"
fi

# 3. The cluster. A stale one (a node stopped or missing, another node image or number of nodes, an API
# server that does not answer) is deleted first: reusing it would test something else than this checkout.
nodes_state() {
  local n
  for n in $(all_nodes); do
    echo "$n $(docker inspect --format '{{.State.Status}} {{.Config.Image}}' "$n" 2>/dev/null || echo "missing -")"
  done
  "$kind" get nodes --name "$name" 2>/dev/null | sort | tr '\n' ' '
}
nodes_wanted() {
  local n
  for n in $(all_nodes); do echo "$n running $NODE_IMAGE"; done
  all_nodes | sort | tr '\n' ' '
}
if cluster_exists; then
  state=$(nodes_state)
  if [[ $state != "$(nodes_wanted)" ]]; then
    say "cluster $name is stale (nodes: $(tr '\n' ';' <<<"$state"); want $((workers + 1)) nodes running $NODE_IMAGE):" \
      "recreating it"
    "$kind" delete cluster --name "$name"
  elif ! "$kind" export kubeconfig --name "$name" --kubeconfig "$kubeconfig" >/dev/null 2>&1 ||
    ! "$kubectl" --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1; then
    say "cluster $name does not answer: recreating it"
    "$kind" delete cluster --name "$name"
  else
    say "reusing cluster $name"
  fi
fi
if ! cluster_exists; then
  port=${KIND_API_PORT:-0}
  if [[ $port != 0 ]] && "$python" -c 'import socket, sys; socket.create_server(("127.0.0.1", int(sys.argv[1]))).close()' \
    "$port" 2>/dev/null; [[ $? -ne 0 && $port != 0 ]]; then
    die "KIND_API_PORT=$port is in use on 127.0.0.1; pick another or leave it unset"
  fi
  config="$artifacts/kind-config.yaml"
  cat >"$config" <<EOF
# Written by hack/e2e-setup-kind.sh.
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  ipFamily: ipv4
  apiServerAddress: 127.0.0.1
  apiServerPort: $port
nodes:
  - role: control-plane
    image: $NODE_IMAGE
$(for _ in $(worker_nodes); do printf '  - role: worker\n    image: %s\n' "$NODE_IMAGE"; done)
kubeadmConfigPatches:
  # etcd is this project's build (ETCD_VERSION), loaded into the node under this tag.
  - |
    kind: ClusterConfiguration
    etcd:
      local:
        imageTag: "${ETCD_VERSION#v}-0"
  # Kubernetes >= 1.35 refuses to run on cgroup v1 unless told to (some machines have nothing else).
  # Pods' upstream DNS is the node image's /kind/pod-resolv.conf (hack/kind/node/entrypoint says why).
  # A Secret volume follows its Secret within syncFrequency (1 min by default): the certificates that
  # JobSet's and our rotators write reach their Pods in seconds instead of a minute or two.
  - |
    kind: KubeletConfiguration
    failCgroupV1: false
    resolvConf: /kind/pod-resolv.conf
    syncFrequency: 10s
EOF
  say "creating cluster $name ($NODE_IMAGE)"
  start=$SECONDS
  "$kind" create cluster --name "$name" --config "$config" --kubeconfig "$kubeconfig" --wait 3m
  say "cluster $name created in $((SECONDS - start)) s"
fi
export KUBECONFIG="$kubeconfig"
k() { "$kubectl" "$@"; }

# kind's --wait covers the control plane only: the workers too, each Ready once podnet wrote its CNI
# configuration.
wait_nodes_ready() {
  local start=$SECONDS
  if ! k -n kube-system rollout status daemonset/podnet --timeout=3m >/dev/null; then
    on_failure
    die "podnet's DaemonSet did not roll out (kubectl -n kube-system logs daemonset/podnet)"
  fi
  if ! k wait --for=condition=Ready nodes --all --timeout=3m >/dev/null; then
    on_failure
    die "not every node is Ready: $(k get nodes --no-headers 2>&1 | tr '\n' ';')"
  fi
  say "$((workers + 1)) nodes Ready after $((SECONDS - start)) s more"
}
wait_nodes_ready

# 4. Images into the workers (the control plane runs none of these Pods: its taint keeps them off). A
# `kind load` of several images saves them into one archive, so the layers they share (the Python base's
# above all) are saved once and imported once per node, into every worker at the same time; when any of
# them is missing from a node, it loads them all. So two loads: the manager's images, which change with
# this checkout's code, and the others, which change only with their recipes.
load_nodes=$(worker_nodes | paste -sd, -)
start=$SECONDS
"$kind" load docker-image "$TRAINER_IMAGE" "$PLUGIN_IMAGE" --name "$name" --nodes "$load_nodes" >/dev/null
# shellcheck disable=SC2086 # EXAMPLE_IMAGES and UPSTREAM_IMAGES are lists of names, split on purpose
"$kind" load docker-image "$JOBSET_IMAGE" "$WORKLOAD_IMAGE" "$PROMETHEUS_IMAGE" $EXAMPLE_IMAGES $UPSTREAM_IMAGES \
  "$KUEUE_IMAGE" "$AGNHOST_IMAGE" "$SCHEDULER_PLUGINS_IMAGE" "$SCHEDULER_PLUGINS_CONTROLLER_IMAGE" \
  ${volcano_images[@]+"${volcano_images[@]}"} --name "$name" --nodes "$load_nodes" >/dev/null
say "images loaded into $load_nodes in $((SECONDS - start)) s"

relative() { "$python" -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$1" "$2"; }

# 5. JobSet from its own manifests, with the image built here. kustomize refuses absolute paths to a base,
# so each overlay names its base relative to itself.
jobset_src=$(cd "$here/tools/crds" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "sigs.k8s.io/jobset" 2>/dev/null) ||
  jobset_src=""
if [[ -z "$jobset_src" || ! -d "$jobset_src/config/default" ]]; then
  (cd "$here/tools/crds" && GOFLAGS=-mod=mod go mod download "sigs.k8s.io/jobset@$JOBSET_VERSION")
  jobset_src=$(cd "$here/tools/crds" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "sigs.k8s.io/jobset")
fi
overlay="$artifacts/jobset"
mkdir -p "$overlay"
cat >"$overlay/kustomization.yaml" <<EOF
# Written by hack/e2e-setup-kind.sh: JobSet's config/default with the image built here. Its manager asks
# for half a CPU; on a one-node cluster of a small machine that is a quarter of what Pods can have.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(relative "$jobset_src/config/default" "$overlay")
images:
  - name: us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset
    newName: ${JOBSET_IMAGE%:*}
    newTag: ${JOBSET_IMAGE##*:}
patches:
  - target: {kind: Deployment, name: jobset-controller-manager}
    patch: |
      - op: replace
        path: /spec/template/spec/containers/0/resources/requests/cpu
        value: 50m
EOF
say "installing JobSet $JOBSET_VERSION"
k apply --server-side --force-conflicts -k "$overlay" >/dev/null
k -n jobset-system rollout status deployment/jobset-controller-manager --timeout=5m
k -n jobset-system wait pods --all --for=condition=Ready --timeout=5m >/dev/null

# 5b. scheduler-plugins as a second scheduler, as its chart's README installs it: the CRDs the chart's default
# plugins read (PodGroup and ElasticQuota from config/crd/bases, NodeResourceTopology from
# manifests/noderesourcetopology; the hosted chart's crds/ links to these files, and a module zip keeps no
# links), then the chart with its values except the two images. Pods reach it by naming its scheduler
# (scheduler.name, "scheduler-plugins-scheduler") in spec.schedulerName; the PodGroup controller keeps each
# PodGroup's status.phase.
# A manager running from before a PodGroup CRD existed is restarted, since it watches a PodGroup kind only when
# its CRD exists as it starts: note_new_crd CRD before the install, restart_manager_if_needed CRD after it.
manager_needs_restart=no
note_new_crd() {
  manager_needs_restart=no
  if ! k get crd "$1" >/dev/null 2>&1 && k -n "$manager_namespace" get deployment "$manager_deployment" >/dev/null 2>&1; then
    manager_needs_restart=yes
  fi
}
restart_manager_if_needed() {  # restart_manager_if_needed CRD
  if [[ $manager_needs_restart == yes ]]; then
    say "restarting the Trainer's manager: it started before the $1 CRD existed"
    k -n "$manager_namespace" rollout restart "deployment/$manager_deployment" >/dev/null
  fi
}

install_scheduler_plugins() {
  local src namespace=scheduler-plugins start=$SECONDS
  src=$(cd "$here/tools/scheduler-plugins" && GOFLAGS=-mod=mod go mod download -json \
    "sigs.k8s.io/scheduler-plugins@$SCHEDULER_PLUGINS_VERSION" | "$python" -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  [[ -d "$src/manifests/install/charts/as-a-second-scheduler" ]] || die "no as-a-second-scheduler chart in $src"
  note_new_crd podgroups.scheduling.x-k8s.io
  say "installing scheduler-plugins $SCHEDULER_PLUGINS_VERSION as a second scheduler"
  k apply --server-side --force-conflicts -f "$src/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml" \
    -f "$src/config/crd/bases/scheduling.x-k8s.io_elasticquotas.yaml" \
    -f "$src/manifests/noderesourcetopology/crd.yaml" >/dev/null
  k wait --for=condition=Established --timeout=2m crd/podgroups.scheduling.x-k8s.io \
    crd/elasticquotas.scheduling.x-k8s.io crd/noderesourcetopologies.topology.node.k8s.io >/dev/null
  "$helm" upgrade --install scheduler-plugins "$src/manifests/install/charts/as-a-second-scheduler" \
    --namespace "$namespace" --create-namespace --set scheduler.image="$SCHEDULER_PLUGINS_IMAGE" \
    --set controller.image="$SCHEDULER_PLUGINS_CONTROLLER_IMAGE" --wait=false >/dev/null
  k -n "$namespace" rollout status deployment/scheduler-plugins-scheduler --timeout=5m
  k -n "$namespace" rollout status deployment/scheduler-plugins-controller --timeout=5m
  restart_manager_if_needed podgroups.scheduling.x-k8s.io
  say "scheduler-plugins is serving ($((SECONDS - start)) s)"
}
install_scheduler_plugins

# 5c. Volcano, as its installer's README installs it (`helm install` of installer/helm/chart/volcano), with
# these values only:
# - the images: the chart composes <basic.image_registry>/<basic.*_image_name>:<basic.image_tag_version>, so
#   the registry and the tag (the names stay volcanosh/vc-scheduler and volcanosh/vc-controller-manager);
# - basic.image_pull_policy IfNotPresent: the chart's Always would pull from a registry this cluster has not;
# - custom.admission_enable false: no webhook manager nor its certificate Job, whose image needs openssl and
#   a kubectl downloaded as it is built (installer/dockerfile/webhook-manager). What those webhooks do is
#   not needed by the Trainer's PodGroups: the queue they default to, the scheduler defaults to as well
#   (default-queue), and they would sit, failurePolicy Fail, in front of every Pod created outside
#   volcano-system and kube-system.
# The scheduler creates the default queue as it starts; the controller manager opens queues (status.state).
install_volcano() {
  local src namespace=volcano-system start=$SECONDS registry tag
  src=$(cd "$here/tools/volcano" && GOFLAGS=-mod=mod go mod download -json \
    "volcano.sh/volcano@$VOLCANO_VERSION" | "$python" -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  [[ -d "$src/installer/helm/chart/volcano" ]] || die "no installer/helm/chart/volcano in $src"
  tag=${VOLCANO_SCHEDULER_IMAGE##*:}
  registry=${VOLCANO_SCHEDULER_IMAGE%/volcanosh/vc-scheduler:*}
  [[ $VOLCANO_CONTROLLER_IMAGE == "$registry/volcanosh/vc-controller-manager:$tag" ]] ||
    die "the chart gives both images one registry and tag: $VOLCANO_SCHEDULER_IMAGE, $VOLCANO_CONTROLLER_IMAGE"
  note_new_crd podgroups.scheduling.volcano.sh
  say "installing Volcano $VOLCANO_VERSION (its scheduler and controller manager)"
  "$helm" upgrade --install volcano "$src/installer/helm/chart/volcano" --namespace "$namespace" \
    --create-namespace --set basic.image_registry="$registry" --set basic.image_tag_version="$tag" \
    --set basic.image_pull_policy=IfNotPresent --set custom.admission_enable=false --wait=false >/dev/null
  k -n "$namespace" rollout status deployment/volcano-scheduler --timeout=5m
  k -n "$namespace" rollout status deployment/volcano-controllers --timeout=5m
  if ! k wait --for=create queue.scheduling.volcano.sh/default --timeout=2m >/dev/null; then
    on_failure
    die "Volcano's scheduler did not create the default queue ($kubectl -n $namespace logs deployment/volcano-scheduler)"
  fi
  restart_manager_if_needed podgroups.scheduling.volcano.sh
  say "Volcano is serving ($((SECONDS - start)) s)"
}
[[ $volcano == 0 ]] || install_volcano

# 6. The Trainer, as a user installs it.
uninstall_trainer() {
  if "$helm" status "$release" -n "$manager_namespace" >/dev/null 2>&1; then
    "$helm" uninstall "$release" -n "$manager_namespace" --wait >/dev/null
  fi
  k delete --ignore-not-found --wait -k "$artifacts/trainer" >/dev/null 2>&1 || true
  k delete --ignore-not-found validatingwebhookconfiguration,mutatingwebhookconfiguration \
    -l app.kubernetes.io/part-of=kubeflow >/dev/null 2>&1 || true
}

install_trainer() {  # install_trainer helm|kustomize
  local how=$1 image=$TRAINER_IMAGE
  if [[ $how == helm ]]; then image=$PLUGIN_IMAGE; fi
  local tag=${image##*:} repository=${image%:*}
  say "installing the Trainer with $how (image $image, $replicas replicas)"
  k create namespace "$manager_namespace" --dry-run=client -o yaml | k apply --server-side -f - >/dev/null
  k label --overwrite namespace "$manager_namespace" pod-security.kubernetes.io/enforce=restricted \
    pod-security.kubernetes.io/warn=restricted app.kubernetes.io/part-of=kubeflow >/dev/null
  if [[ $how == helm ]]; then
    "$helm" upgrade --install "$release" "$repo/charts/kubeflow-trainer-py" --namespace "$manager_namespace" \
      --set image.repository="$repository" --set image.tag="$tag" --set manager.replicas="$replicas" \
      --set runtimes.defaultEnabled=true --set 'manager.config.plugins.enabled={Example}' \
      --set manager.config.featureGates.TrainJobStatus=true --wait=false >/dev/null
  else
    local overlay="$artifacts/trainer"
    mkdir -p "$overlay"
    cat >"$overlay/kustomization.yaml" <<EOF
# Written by hack/e2e-setup-kind.sh: config/default running the image built for this cluster.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(relative "$repo/config/default" "$overlay")
images:
  - name: $placeholder_image
    newName: $repository
    newTag: $tag
replicas:
  - name: $manager_deployment
    count: $replicas
EOF
    k apply --server-side --force-conflicts -k "$overlay" >/dev/null
    k wait --for=condition=Established --timeout=2m crd/trainjobs.trainer.kubeflow.org \
      crd/trainingruntimes.trainer.kubeflow.org crd/clustertrainingruntimes.trainer.kubeflow.org >/dev/null
    k apply --server-side --force-conflicts -k "$repo/config/runtimes" >/dev/null
  fi
  # 7. Serving.
  k -n "$manager_namespace" rollout status "deployment/$manager_deployment" --timeout=5m
  "$python" "$here/e2e_paths.py" wait-serving --flavour kind --kubeconfig "$kubeconfig" \
    --timeout "${TRAINER_SERVING_TIMEOUT:-300}"
}

current_install() {
  if "$helm" status "$release" -n "$manager_namespace" >/dev/null 2>&1; then echo helm
  elif k -n "$manager_namespace" get deployment "$manager_deployment" >/dev/null 2>&1; then echo kustomize
  else echo none; fi
}

run_suite() {  # run_suite PYTEST-ARGS...
  cd "$repo"
  E2E_CLUSTER=kind KUBECONFIG="$kubeconfig" E2E_INSTALL=$(current_install) WORKLOAD_IMAGE="$WORKLOAD_IMAGE" \
    PROMETHEUS_IMAGE="$PROMETHEUS_IMAGE" E2E_VOLCANO=$volcano "$python" -m pytest test/e2e "$@"
}

if [[ $action == ci ]]; then
  # The kustomize install first, with one TrainJob on real Pods and one that shows no third-party plugin's
  # effect (the plain image, the shipped Configuration), then the Helm install for the whole suite.
  uninstall_trainer
  install_trainer kustomize
  trap - ERR
  say "the kustomize install: a TrainJob on real Pods, and no plugin's effect"
  run_suite -p no:cacheprovider -q -k "test_kind_allreduce_on_three_nodes or test_kind_example_plugin" >&3 ||
    { on_failure; exit 1; }
  trap on_failure ERR
  uninstall_trainer
  install_trainer helm
else
  have=$(current_install)
  if [[ $have != "$install" ]]; then
    [[ $have == none ]] || uninstall_trainer
    install_trainer "$install"
  else
    say "the Trainer is installed with $install; upgrading it to this checkout's image"
    install_trainer "$install"
  fi
fi

# 8. Kueue, as its docs tell users to install it, with the TrainJob integration on. After the Trainer: the
# integration waits for the TrainJob API to be served.
install_kueue() {
  local overlay="$artifacts/kueue" start=$SECONDS
  rm -rf "$overlay"
  "$python" "$here/e2e_paths.py" kueue-overlay --out "$overlay" --image "$KUEUE_IMAGE" \
    --frameworks "${KUEUE_INTEGRATIONS:-trainer.kubeflow.org/trainjob}"
  say "installing Kueue $KUEUE_VERSION (integrations: ${KUEUE_INTEGRATIONS:-trainer.kubeflow.org/trainjob})"
  k apply --server-side --force-conflicts -k "$overlay" >/dev/null
  k -n kueue-system rollout status deployment/kueue-controller-manager --timeout=5m
  "$python" "$here/e2e_paths.py" wait-kueue --kubeconfig "$kubeconfig" --timeout 300
  say "Kueue serves ($((SECONDS - start)) s)"
}
install_kueue

trap - ERR
say "cluster $name is ready; the manager's log: $kubectl -n $manager_namespace logs deployment/$manager_deployment"
if [[ $action == up ]]; then
  echo "export KUBECONFIG=$kubeconfig" >&3
  echo "export E2E_CLUSTER=kind" >&3
  echo "export WORKLOAD_IMAGE=$WORKLOAD_IMAGE" >&3
  echo "export PROMETHEUS_IMAGE=$PROMETHEUS_IMAGE" >&3
  echo "export E2E_VOLCANO=$volcano" >&3
  exit 0
fi

say "running test/e2e against $name"
exec 1>&3
rc=0
# shellcheck disable=SC2086 # PYTEST_ARGS is a list of arguments, split on purpose
run_suite ${PYTEST_ARGS:-} || rc=$?
if [[ $action == ci ]]; then
  (( rc == 0 )) || on_failure
  "$kind" delete cluster --name "$name" >/dev/null 2>&1 || true
  rm -f "$kubeconfig"
fi
exit $rc
