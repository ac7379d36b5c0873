#!/usr/bin/env bash
# Build the container images of the kind tier without a registry: every image comes from Debian's packages,
# the binaries hack/build-binaries.sh builds from pinned Go modules, and this repository.
#
#   hack/build-images.sh              build what is missing (podnet, node, jobset, manager, plugin,
#                                     workload, prometheus, examples, upstream, kueue, agnhost,
#                                     scheduler-plugins; volcano only when named)
#   hack/build-images.sh node ...     build only these
#   hack/build-images.sh --print      print the image names, build nothing
#
# The images:
#   podnet    the nodes' Pod network daemon (PODNET_IMAGE, hack/kind/podnet/): the Python base with Debian's
#             iproute2 and iptables, and podnet.py, which writes each node's bridge CNI configuration on
#             its podCIDR, routes to the other nodes' podCIDRs and masquerades what leaves the Pod network
#             (kindnetd's job: kindnetd is not served by the Go module proxy)
#   node      the kind node image (NODE_IMAGE): Debian with systemd, containerd and runc, the Kubernetes
#             node binaries, and the images kubeadm runs (kube-apiserver, kube-controller-manager,
#             kube-scheduler, kube-proxy, etcd, CoreDNS, pause) and podnet's, saved into /kind/images,
#             imported into containerd when a node boots (hack/kind/node/); kind applies podnet's
#             DaemonSet as the default CNI (files/kind/manifests/default-cni.yaml)
#   jobset    JobSet's manager (JOBSET_IMAGE), for JobSet's own manifests
#   manager   this project's manager (TRAINER_IMAGE) from the repository's Dockerfile, on a Debian Python
#             base; pip installs from wheels the host downloaded, served on 127.0.0.1 for the build
#   plugin    the manager image with the example third-party plugin installed (PLUGIN_IMAGE): built from
#             test/plugins/example_plugin/Dockerfile FROM the manager image above, with the plugin's wheel
#             built on the host, as docs/plugins.md tells users to ship a plugin; the Helm install of
#             hack/e2e-setup-kind.sh runs it with the plugin enabled by name
#   workload  the training Pods' image (WORKLOAD_IMAGE): Debian's Python and test/e2e/workload/
#   prometheus  Debian's Prometheus (PROMETHEUS_IMAGE), which the kind tier runs to scrape the manager as
#             the shipped ServiceMonitor says and to evaluate the shipped Grafana dashboard's queries
#   examples  one image per directory of examples/images/ (EXAMPLE_IMAGES), each tagged with the name the
#             example TrainJob beside it uses (kubeflow-trainer-py/example-<name>:<version>), from that
#             directory's Dockerfile, which a user with a registry builds as it is from public Debian
#             (examples/images/README.md)
#   upstream  stand-ins for the images upstream's e2e suite runs (UPSTREAM_IMAGES), under the names its specs
#             and runtimes use, as test/e2e/upstream/images lists them: the Python base or an example image
#             tagged as it is, or a directory of test/e2e/upstream/ built on the Python base
#             (test/e2e/upstream/README.md says what each does for which spec)
#   kueue     Kueue's manager (KUEUE_IMAGE): the kueue binary hack/build-binaries.sh builds from its Go module
#             (KUEUE_VERSION) as /manager on the Python base, run as 65532 as Kueue's own image is, for
#             Kueue's own manifests (hack/e2e-setup-kind.sh installs them)
#   agnhost   Kubernetes' agnhost test program (AGNHOST_IMAGE) at /agnhost on the Python base, tagged with the
#             name and tag Kueue's e2e specs run (its hack/testing/agnhost/Dockerfile, without the digest,
#             as Kueue's CI tags it); refused when the Kubernetes module's agnhost VERSION is another
#   scheduler-plugins  scheduler-plugins' scheduler (SCHEDULER_PLUGINS_IMAGE: /bin/kube-scheduler, the
#             Coscheduling plugin compiled in) and its PodGroup controller (SCHEDULER_PLUGINS_CONTROLLER_IMAGE:
#             /bin/controller), as its build/scheduler and build/controller Dockerfiles lay them out, on the
#             Python base (no other base to build; the manager's image starts from it too) instead of
#             distroless; hack/e2e-setup-kind.sh installs them with the module's own Helm chart
#   volcano   Volcano's scheduler (VOLCANO_SCHEDULER_IMAGE: /vc-scheduler) and controller manager
#             (VOLCANO_CONTROLLER_IMAGE: /vc-controller-manager), as its installer/dockerfile Dockerfiles lay
#             them out (the binary at the root, its entrypoint, run as root as upstream's images are), on the
#             Python base instead of Alpine; named <registry>/volcanosh/<name>:<tag> with one tag, as the
#             chart composes its image names (basic.image_registry, basic.*_image_name,
#             basic.image_tag_version); hack/e2e-setup-kind.sh installs them with the module's own Helm chart
#             when VOLCANO=1
#
# Base images are root filesystems made by debootstrap (DEBIAN_SUITE in hack/versions.env) from
# DEBIAN_MIRROR (default: the mirror this machine's apt uses) and imported; each is tagged by a hash of its
# package list, and every other image by a hash of what it is built from, so a second run builds nothing
# and a changed recipe rebuilds only its images. The manager is rebuilt whenever its sources change. An
# example image's Debian packages (its Dockerfile's DEBIAN_PACKAGES argument) are in its base image, so
# its Dockerfile's apt-get step finds nothing to install; its Python packages (requirements.txt) come from
# wheels the host's pip downloaded, served on 127.0.0.1 for the build as the manager's are.
# Needs a Docker engine (hack/docker-engine.sh), and root for debootstrap.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${TRAINER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeflow-trainer-py}
work="$cache/images"
log_dir="$cache/build-logs"
python="$repo/.venv/bin/python"

die() { echo "build-images: error: $*" >&2; exit 1; }
say() { echo "build-images: $*" >&2; }


exists() { docker image inspect "$1" >/dev/null 2>&1; }

timed() {  # timed NAME CMD...: run CMD with its output in the build log, say how long it took
  local name=$1 start=$SECONDS; shift
  say "building $name (log: $log_dir/image-$name.log)"
  if ! "$@" >"$log_dir/image-$name.log" 2>&1; then
    tail -n 25 "$log_dir/image-$name.log" >&2
    die "building $name failed; full log in $log_dir/image-$name.log"
  fi
  say "built $name in $((SECONDS - start)) s"
}

mirror=${DEBIAN_MIRROR:-$(sed -nE 's#^(deb|URIs:)[[:space:]]+(\[[^]]*\][[:space:]]+)?(https?://[^[:space:]]+/debian)/?([[:space:]].*)?$#\3#p' \
  /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1 || true)}
mirror=${mirror:-http://deb.debian.org/debian}

# debian_base VARIANT PACKAGE...: a minbase root filesystem with these packages, imported as an image.
# Prints the image name.
debian_base() {
  local variant=$1; shift
  local key; key=$(printf '%s\n' "$DEBIAN_SUITE" "$@" | sha256sum | cut -c1-12)
  local image="trainer-e2e/debian-$variant:$DEBIAN_SUITE-$key"
  if ! exists "$image"; then
    command -v debootstrap >/dev/null 2>&1 || {
      [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1 || die "debootstrap is needed (Debian: apt-get install debootstrap)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null || die "apt-get install debootstrap failed"
    }
    [[ $(id -u) -eq 0 ]] || die "debootstrap needs root to make the $variant base image"
    local root="$work/rootfs-$variant.$$"
    rm -rf "$root"
    # shellcheck disable=SC2064 # expand now: the directory of this call
    trap "rm -rf '$root'" EXIT
    local include; include=$(IFS=,; echo "$*")
    timed "debian-$variant" debootstrap --variant=minbase ${include:+--include="$include"} \
      "$DEBIAN_SUITE" "$root" "$mirror"
    # What an image does not need: package lists and downloaded packages, logs, the build host's names.
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
      "$root"/var/log/* "$root"/etc/hostname "$root"/etc/machine-id
    : >"$root/etc/resolv.conf"
    tar --numeric-owner -C "$root" -c . | docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
    rm -rf "$root"
    trap - EXIT
  fi
  echo "$image"
}

# static_image NAME BINARY ENTRYPOINT [USER]: an image with one static binary and nothing else.
static_image() {
  local name=$1 binary=$2 entrypoint=$3 user=${4:-}
  local ctx="$work/ctx-static"
  rm -rf "$ctx"; mkdir -p "$ctx"
  cp "$binary" "$ctx/"
  {
    echo "FROM scratch"
    echo "COPY $(basename "$binary") /usr/local/bin/$(basename "$binary")"
    echo "ENV PATH=/usr/local/bin"
    [[ -n "$entrypoint" ]] && echo "ENTRYPOINT [\"$entrypoint\"]"
    [[ -n "$user" ]] && echo "USER $user"
  } >"$ctx/Dockerfile"
  docker build --quiet --network none --tag "$name" "$ctx" >/dev/null
  rm -rf "$ctx"
}

# ------------------------------------------------------------------------------------------------- node

# The image names kubeadm expects for this release; etcd is ours (ETCD_VERSION), named by the patch that
# hack/e2e-setup-kind.sh gives kubeadm (etcd.local.imageTag).
kubeadm_images() { "$KUBERNETES_NODE_BIN/kubeadm" config images list --kubernetes-version "$KUBERNETES_VERSION" 2>/dev/null; }
ETCD_IMAGE="registry.k8s.io/etcd:${ETCD_VERSION#v}-0"

build_node() {
  local ctx="$work/ctx-node" listed pause_image coredns_image
  for b in "$KUBERNETES_NODE_BIN/kubelet" "$KUBERNETES_NODE_BIN/kubeadm" "$KUBERNETES_NODE_BIN/kube-proxy" \
    "$KUBERNETES_BIN/kube-apiserver" "$KUBERNETES_BIN/kubectl" "$COREDNS_BIN/coredns" "$CRICTL_BIN/crictl" \
    "$PAUSE_BIN/pause" "$ETCD_BIN/etcd"; do
    [[ -x "$b" ]] || die "$b is missing (run: hack/build-binaries.sh)"
  done
  listed=$(kubeadm_images) || die "kubeadm config images list failed"
  pause_image=$(grep '/pause:' <<<"$listed") || die "kubeadm names no pause image"
  coredns_image=$(grep '/coredns:' <<<"$listed") || die "kubeadm names no CoreDNS image"
  [[ ${coredns_image##*:} == "$COREDNS_VERSION" ]] ||
    die "kubeadm $KUBERNETES_VERSION runs CoreDNS ${coredns_image##*:}, hack/versions.env pins $COREDNS_VERSION"
  [[ ${pause_image##*:} == "$("$PAUSE_BIN/pause" -v | awk '{print $2}' | sed 's/^v//')" ]] ||
    die "kubeadm $KUBERNETES_VERSION runs $pause_image, the pause binary is $("$PAUSE_BIN/pause" -v)"

  local base iptables_base
  base=$(debian_base node systemd systemd-sysv dbus containerd runc iptables iproute2 ethtool socat conntrack \
    ebtables kmod util-linux mount procps ca-certificates containernetworking-plugins jq libseccomp2 \
    bash-completion less)
  iptables_base=$(debian_base iptables iptables conntrack)

  rm -rf "$ctx"; mkdir -p "$ctx/bin" "$ctx/images"
  local k8s=registry.k8s.io
  static_image "$k8s/kube-apiserver:$KUBERNETES_VERSION" "$KUBERNETES_BIN/kube-apiserver" ""
  static_image "$k8s/kube-controller-manager:$KUBERNETES_VERSION" "$KUBERNETES_BIN/kube-controller-manager" ""
  static_image "$k8s/kube-scheduler:$KUBERNETES_VERSION" "$KUBERNETES_BIN/kube-scheduler" ""
  static_image "$ETCD_IMAGE" "$ETCD_BIN/etcd" ""
  static_image "$coredns_image" "$COREDNS_BIN/coredns" /usr/local/bin/coredns
  static_image "$pause_image" "$PAUSE_BIN/pause" /usr/local/bin/pause
  cp "$KUBERNETES_NODE_BIN/kube-proxy" "$ctx/kube-proxy"
  printf 'FROM %s\nCOPY kube-proxy /usr/local/bin/kube-proxy\n' "$iptables_base" |
    docker build --quiet --network none --tag "$k8s/kube-proxy:$KUBERNETES_VERSION" -f - "$ctx" >/dev/null
  rm -f "$ctx/kube-proxy"
  # The Pod network's image: it must run before a node is Ready, so it travels in the node image.
  exists "$PODNET_IMAGE" || timed podnet build_podnet
  local i=0 image
  for image in "$k8s/kube-apiserver:$KUBERNETES_VERSION" "$k8s/kube-controller-manager:$KUBERNETES_VERSION" \
    "$k8s/kube-scheduler:$KUBERNETES_VERSION" "$k8s/kube-proxy:$KUBERNETES_VERSION" "$ETCD_IMAGE" \
    "$coredns_image" "$pause_image" "$PODNET_IMAGE"; do
    i=$((i + 1))
    docker save --output "$ctx/images/$i-$(basename "${image%%:*}").tar" "$image"
  done

  cp -r "$here/kind/node/." "$ctx/"
  cp "$here/kind/runc-capfilter" "$ctx/runc-capfilter"
  cp "$KUBERNETES_NODE_BIN/kubelet" "$KUBERNETES_NODE_BIN/kubeadm" "$KUBERNETES_BIN/kubectl" \
    "$CRICTL_BIN/crictl" "$ctx/bin/"
  sed -i "s#@PAUSE_IMAGE@#$pause_image#" "$ctx/files/etc/containerd/config.toml"
  sed -i "s#@PODNET_IMAGE@#$PODNET_IMAGE#" "$ctx/files/kind/manifests/default-cni.yaml"
  docker build --network none --build-arg BASE="$base" --build-arg KUBERNETES_VERSION="$KUBERNETES_VERSION" \
    --tag "$NODE_IMAGE" "$ctx"
  rm -rf "$ctx"
}

# ----------------------------------------------------------------------------------------------- podnet

build_podnet() {
  docker build --network host --build-arg BASE="$(python_base)" --tag "$PODNET_IMAGE" "$here/kind/podnet"
}

# ----------------------------------------------------------------------------------------------- jobset

build_jobset() {
  [[ -x "$JOBSET_BIN/jobset" ]] || die "$JOBSET_BIN/jobset is missing (run: hack/build-binaries.sh jobset)"
  # JobSet's manifests run /manager as a non-root user with a read-only root filesystem.
  local ctx="$work/ctx-jobset"
  rm -rf "$ctx"; mkdir -p "$ctx"
  cp "$JOBSET_BIN/jobset" "$ctx/manager"
  printf 'FROM scratch\nCOPY manager /manager\nUSER 65532:65532\nENTRYPOINT ["/manager"]\n' >"$ctx/Dockerfile"
  docker build --network none --tag "$JOBSET_IMAGE" "$ctx"
  rm -rf "$ctx"
}

# ---------------------------------------------------------------------------------------------- manager

python_base() { debian_base python python3 python3-venv; }

# pip_download DEST PIP-ARGS...: wheels for CPython 3.11 on x86_64 Linux (Debian bookworm's Python), downloaded
# by the host's pip, which has the machine's registry access and certificates.
pip_download() {
  local dest=$1; shift
  mkdir -p "$dest"
  "$python" -m pip download --quiet --dest "$dest" --only-binary=:all: --python-version 3.11 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_28_x86_64 \
    --platform any --implementation cp "$@"
}

# build_with_wheels WHEELS DOCKER-BUILD-ARGS...: `docker build --network host` with pip pointed at WHEELS,
# served read-only on a loopback port for the build, so the Dockerfile's pip needs no index.
build_with_wheels() {
  local wheels=$1 port server; shift
  port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$python" -m http.server --bind 127.0.0.1 --directory "$wheels" "$port" >/dev/null 2>&1 &
  server=$!
  # shellcheck disable=SC2064
  trap "kill $server 2>/dev/null || true" RETURN
  for _ in $(seq 50); do "$python" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/')" \
    2>/dev/null && break; sleep 0.1; done
  docker build --network host --build-arg PIP_NO_INDEX=1 --build-arg PIP_FIND_LINKS="http://127.0.0.1:$port/" "$@"
}

# The manager: the package's pinned dependencies and its build backend.
build_manager() {
  [[ -x "$python" ]] || die "$python is missing (run: make venv)"
  local base wheels="$work/wheelhouse"
  base=$(python_base)
  pip_download "$wheels" -r "$repo/requirements/manager.txt" 'setuptools>=77' wheel
  build_with_wheels "$wheels" --build-arg BASE_IMAGE="$base" --tag "$TRAINER_IMAGE" "$repo"
}

# ----------------------------------------------------------------------------------------------- plugin

# The example plugin's directory as a user has it, its wheel built outside the image (`pip wheel --no-deps`,
# the host virtualenv's setuptools, no index), then its Dockerfile on the manager image, without network.
build_plugin() {
  exists "$TRAINER_IMAGE" || die "the plugin image derives from $TRAINER_IMAGE, which is missing (hack/build-images.sh manager)"
  local ctx="$work/ctx-plugin"
  rm -rf "$ctx"; mkdir -p "$ctx"
  cp -r "$repo/test/plugins/example_plugin/." "$ctx/"
  rm -rf "$ctx/dist" "$ctx/build" "$ctx"/*.egg-info
  (cd "$ctx" && "$python" -m pip wheel --quiet --no-deps --no-build-isolation --no-index --wheel-dir dist .)
  docker build --network none --build-arg MANAGER_IMAGE="$TRAINER_IMAGE" --tag "$PLUGIN_IMAGE" "$ctx"
  rm -rf "$ctx"
}

# --------------------------------------------------------------------------------------------- workload

build_workload() {
  local base; base=$(python_base)
  printf 'FROM %s\nCOPY . /opt/workload/\nUSER 65532:65532\nWORKDIR /opt/workload\n' "$base" |
    docker build --network none --tag "$WORKLOAD_IMAGE" -f - "$repo/test/e2e/workload"
}

# ------------------------------------------------------------------------------------------- prometheus

# Debian's prometheus package: downloaded and unpacked (not installed: its web assets and their
# dependencies are most of an installed 450 MB) by apt in the Python base, from that base's suite and mirror
# with apt's signature checks; the image keeps the server and the C library it links. Run as nobody.
build_prometheus() {
  local base; base=$(python_base)
  docker build --network host --tag "$PROMETHEUS_IMAGE" - <<EOF
FROM $base AS debian
RUN apt-get update -qq && cd /tmp && apt-get download -qq prometheus && dpkg-deb -x prometheus_*.deb /tmp/unpacked
FROM scratch
COPY --from=debian /tmp/unpacked/usr/bin/prometheus /usr/bin/prometheus
COPY --from=debian /lib/x86_64-linux-gnu/libc.so.6 /lib/x86_64-linux-gnu/libc.so.6
COPY --from=debian /lib64/ld-linux-x86-64.so.2 /lib64/ld-linux-x86-64.so.2
USER 65534:65534
WORKDIR /prometheus
ENTRYPOINT ["/usr/bin/prometheus"]
EOF
}

# ------------------------------------------------------------------------------------- scheduler-plugins

# One image per command, as scheduler-plugins' build/scheduler and build/controller Dockerfiles make them:
# the binary in /bin, run as 65532 (nonroot), the entrypoint the binary. The chart's scheduler container
# names its command (/bin/kube-scheduler); the controller's runs the entrypoint.
build_scheduler_plugins() {
  local bin=$SCHEDULER_PLUGINS_BIN b ctx="$work/ctx-scheduler-plugins" base image
  for b in kube-scheduler controller; do
    [[ -x "$bin/$b" ]] || die "$bin/$b is missing (run: hack/build-binaries.sh scheduler-plugins)"
  done
  base=$(python_base)
  rm -rf "$ctx"; mkdir -p "$ctx"
  cp "$bin/kube-scheduler" "$bin/controller" "$ctx/"
  for b in controller kube-scheduler; do  # the scheduler's last: its presence says both are built
    image=$SCHEDULER_PLUGINS_IMAGE
    [[ $b == controller ]] && image=$SCHEDULER_PLUGINS_CONTROLLER_IMAGE
    printf 'FROM %s\nCOPY %s /bin/%s\nUSER 65532:65532\nENTRYPOINT ["/bin/%s"]\n' "$base" "$b" "$b" "$b" |
      docker build --network none --tag "$image" -f - "$ctx"
  done
  rm -rf "$ctx"
}

# ------------------------------------------------------------------------------------------------ volcano

build_volcano() {
  local b
  for b in vc-scheduler vc-controller-manager; do
    [[ -x "$VOLCANO_BIN/$b" ]] || die "$VOLCANO_BIN/$b is missing (run: hack/build-binaries.sh volcano)"
  done
  binary_on_python_base "$VOLCANO_CONTROLLER_IMAGE" "$VOLCANO_BIN/vc-controller-manager" /vc-controller-manager
  # The scheduler's last: its presence says both are built.
  binary_on_python_base "$VOLCANO_SCHEDULER_IMAGE" "$VOLCANO_BIN/vc-scheduler" /vc-scheduler
}

# ---------------------------------------------------------------------------------------------- examples

# build_example NAME: examples/images/NAME/Dockerfile on a base that has its DEBIAN_PACKAGES, with the
# wheels of its requirements.txt (if any); tagged by content (the cache) and by the examples' name.
build_example() {
  local name=$1 dir="$repo/examples/images/$1" packages base wheels
  packages=$(sed -nE 's/^ARG DEBIAN_PACKAGES="([^"]*)"$/\1/p' "$dir/Dockerfile")
  [[ -n "$packages" ]] || die "$dir/Dockerfile has no ARG DEBIAN_PACKAGES=\"...\" line"
  # shellcheck disable=SC2086 # a list of package names, split on purpose
  # Named by its package list alone: examples that need only Debian's Python share the manager's base.
  base=$(debian_base python $packages)
  wheels="$work/wheelhouse-example-$name"
  if [[ -f "$dir/requirements.txt" ]]; then
    [[ -x "$python" ]] || die "$python is missing (run: make venv)"
    pip_download "$wheels" -r "$dir/requirements.txt"
  else
    mkdir -p "$wheels"
  fi
  build_with_wheels "$wheels" --build-arg BASE_IMAGE="$base" --tag "trainer-e2e/example-$name:$(example_key "$name")" "$dir"
}

build_examples() {
  local n cached
  for n in $example_names; do
    cached="trainer-e2e/example-$n:$(example_key "$n")"
    if exists "$cached"; then
      say "example $n: $cached (cached)"
    else
      timed "example-$n" build_example "$n"
    fi
    docker tag "$cached" "$(example_image "$n")"
  done
}

# --------------------------------------------------------------------------------------------- upstream

# build_upstream_dir DIR: test/e2e/upstream/DIR/Dockerfile on the Python base, with the pause binary in its
# context when the Dockerfile copies it; tagged by content (the cache).
build_upstream_dir() {
  local dir=$1 ctx="$work/ctx-upstream-$1"
  rm -rf "$ctx"; cp -r "$repo/test/e2e/upstream/$dir" "$ctx"
  if grep -q '^COPY pause ' "$ctx/Dockerfile"; then
    [[ -x "$PAUSE_BIN/pause" ]] || die "$PAUSE_BIN/pause is missing (run: hack/build-binaries.sh pause)"
    cp "$PAUSE_BIN/pause" "$ctx/pause"
  fi
  docker build --network none --build-arg BASE_IMAGE="$(python_base)" \
    --tag "trainer-e2e/upstream-$dir:$(upstream_key "$dir")" "$ctx"
  rm -rf "$ctx"
}

build_upstream() {
  local name from source
  while read -r name from; do
    case $from in
      python) source=$(python_base) ;;
      example-*)
        source="trainer-e2e/example-${from#example-}:$(example_key "${from#example-}")"
        exists "$source" || timed "$from" build_example "${from#example-}"
        ;;
      *)
        [[ -f "$repo/test/e2e/upstream/$from/Dockerfile" ]] || die "test/e2e/upstream/images: $name from $from:" \
          "no test/e2e/upstream/$from/Dockerfile"
        source="trainer-e2e/upstream-$from:$(upstream_key "$from")"
        exists "$source" || timed "upstream-$from" build_upstream_dir "$from"
        ;;
    esac
    docker tag "$source" "$name"
  done < <(upstream_list)
}

# -------------------------------------------------------------------------------------------- kueue

# binary_on_python_base TAG BINARY PATH [USER]: BINARY at PATH (its entrypoint) on the Python base, whose
# layers the node has already (the images are loaded together).
binary_on_python_base() {
  local tag=$1 binary=$2 path=$3 user=${4:-} ctx="$work/ctx-binary"
  rm -rf "$ctx"; mkdir -p "$ctx"
  cp "$binary" "$ctx/binary"
  {
    echo "FROM $(python_base)"
    echo "COPY binary $path"
    [[ -z "$user" ]] || echo "USER $user"
    echo "ENTRYPOINT [\"$path\"]"
  } | docker build --network none --tag "$tag" -f - "$ctx"
  rm -rf "$ctx"
}

# Kueue's manifests run /manager as a non-root user, as Kueue's own image does.
build_kueue() {
  [[ -x "$KUEUE_BIN/kueue" ]] || die "$KUEUE_BIN/kueue is missing (run: hack/build-binaries.sh kueue)"
  binary_on_python_base "$KUEUE_IMAGE" "$KUEUE_BIN/kueue" /manager 65532:65532
}

build_agnhost() {
  [[ -x "$AGNHOST_BIN/agnhost" ]] || die "$AGNHOST_BIN/agnhost is missing (run: hack/build-binaries.sh agnhost)"
  local version; version=$("$AGNHOST_BIN/agnhost" --version 2>/dev/null | awk '{print $NF}')
  [[ ${AGNHOST_IMAGE##*:} == "$version" ]] ||
    die "Kueue's specs run $AGNHOST_IMAGE, the agnhost of Kubernetes $KUBERNETES_VERSION is $version"
  binary_on_python_base "$agnhost_cached" "$AGNHOST_BIN/agnhost" /agnhost
}

# The agnhost image Kueue's specs name: the FROM line of hack/testing/agnhost/Dockerfile in the Kueue module
# (KUEUE_VERSION, as hack/tools/kueue pins it), without its digest.
kueue_agnhost_image() {
  local dir
  dir=$(cd "$here/tools/kueue" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/kueue 2>/dev/null) || dir=""
  if [[ -z "$dir" || ! -f "$dir/hack/testing/agnhost/Dockerfile" ]]; then
    (cd "$here/tools/kueue" && GOFLAGS=-mod=mod go mod download sigs.k8s.io/kueue) >/dev/null 2>&1 || true
    dir=$(cd "$here/tools/kueue" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/kueue 2>/dev/null) || dir=""
  fi
  [[ -n "$dir" && -f "$dir/hack/testing/agnhost/Dockerfile" ]] || return 0
  awk 'toupper($1) == "FROM" {print $2; exit}' "$dir/hack/testing/agnhost/Dockerfile" | sed 's/@.*//'
}

# ---------------------------------------------------------------------------------------------- names

# What each recipe is made of: the text of the functions that build it (not the whole of this script, so
# that adding an image rebuilds no other) and the files it copies; a change to either rebuilds the image.
recipe_key() {  # recipe_key FUNCTION... -- FILE...
  local funcs=()
  while [[ $1 != -- ]]; do funcs+=("$1"); shift; done
  shift
  { declare -f "${funcs[@]}"; (cd "$repo" && cat "$@" hack/versions.env); } | sha256sum | cut -c1-12
}
podnet_key=$(recipe_key build_podnet python_base debian_base -- $(cd "$repo" && find hack/kind/podnet -type f | sort))
PODNET_IMAGE=${PODNET_IMAGE:-trainer-e2e/podnet:$podnet_key}
# The node image carries podnet's image (by name: content-keyed unless PODNET_IMAGE is given).
node_key=$( { echo "$PODNET_IMAGE"; recipe_key build_node kubeadm_images debian_base static_image -- \
  hack/kind/runc-capfilter $(cd "$repo" && find hack/kind/node -type f | sort); } | sha256sum | cut -c1-12)
workload_key=$(recipe_key build_workload python_base debian_base -- \
  $(cd "$repo" && find test/e2e/workload -type f -not -name '*.pyc' | sort))
prometheus_key=$(recipe_key build_prometheus python_base debian_base --)
plugin_files() { (cd "$repo" && git ls-files -co --exclude-standard test/plugins/example_plugin | grep -v '\.pyc$' | sort); }
manager_key=$(cd "$repo" && git ls-files -co --exclude-standard Dockerfile .dockerignore pyproject.toml README.md \
  requirements/manager.txt config/crd controller runtime cmd | grep -v '\.pyc$' |
  tar -c --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --no-recursion -T - | sha256sum | cut -c1-12)

NODE_IMAGE=${NODE_IMAGE:-trainer-e2e/kind-node:$KUBERNETES_VERSION-$node_key}
JOBSET_IMAGE=${JOBSET_IMAGE:-trainer-e2e/jobset:$JOBSET_VERSION}
TRAINER_IMAGE=${TRAINER_IMAGE:-kubeflow-trainer-py:e2e-$manager_key}
# The plugin image changes with its manager image (by name: content-keyed unless TRAINER_IMAGE is given).
plugin_key=$( { echo "$TRAINER_IMAGE"; recipe_key build_plugin -- $(plugin_files); } | sha256sum | cut -c1-12)
PLUGIN_IMAGE=${PLUGIN_IMAGE:-kubeflow-trainer-py:e2e-example-plugin-$plugin_key}
WORKLOAD_IMAGE=${WORKLOAD_IMAGE:-trainer-e2e/allreduce:$workload_key}
PROMETHEUS_IMAGE=${PROMETHEUS_IMAGE:-trainer-e2e/prometheus:$prometheus_key}
# Keyed by the recipe and by the binaries' directory (its name carries the version and the wrapper's hash).
scheduler_plugins_key=$( { recipe_key build_scheduler_plugins python_base debian_base --;
  bash "$here/build-binaries.sh" --print | grep '^SCHEDULER_PLUGINS_BIN='; } | sha256sum | cut -c1-12)
SCHEDULER_PLUGINS_IMAGE=${SCHEDULER_PLUGINS_IMAGE:-trainer-e2e/scheduler-plugins-scheduler:$SCHEDULER_PLUGINS_VERSION-$scheduler_plugins_key}
SCHEDULER_PLUGINS_CONTROLLER_IMAGE=${SCHEDULER_PLUGINS_CONTROLLER_IMAGE:-trainer-e2e/scheduler-plugins-controller:$SCHEDULER_PLUGINS_VERSION-$scheduler_plugins_key}
# Volcano's chart composes <image_registry>/<image name>:<image_tag_version>, one tag for all its images.
volcano_key=$( { recipe_key build_volcano binary_on_python_base python_base debian_base --;
  bash "$here/build-binaries.sh" --print | grep '^VOLCANO_BIN='; } | sha256sum | cut -c1-12)
VOLCANO_SCHEDULER_IMAGE=${VOLCANO_SCHEDULER_IMAGE:-trainer-e2e/volcanosh/vc-scheduler:$VOLCANO_VERSION-$volcano_key}
VOLCANO_CONTROLLER_IMAGE=${VOLCANO_CONTROLLER_IMAGE:-trainer-e2e/volcanosh/vc-controller-manager:$VOLCANO_VERSION-$volcano_key}
kueue_key=$(recipe_key build_kueue binary_on_python_base python_base debian_base --)
KUEUE_IMAGE=${KUEUE_IMAGE:-trainer-e2e/kueue:$KUEUE_VERSION-$kueue_key}
# Built under a content key (the cache), tagged with the name Kueue's specs use.
agnhost_cached="trainer-e2e/agnhost:$KUBERNETES_VERSION-$(recipe_key build_agnhost binary_on_python_base python_base \
  debian_base --)"
AGNHOST_IMAGE=${AGNHOST_IMAGE:-$(kueue_agnhost_image)}
AGNHOST_IMAGE=${AGNHOST_IMAGE:-registry.k8s.io/e2e-test-images/agnhost:unknown}

# The example images: the name the examples use (the package's version as the tag, so that a kubelet never
# pulls it), and a cache key per directory.
examples_version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' "$repo/pyproject.toml")
example_names=$(cd "$repo/examples/images" 2>/dev/null && find . -mindepth 2 -maxdepth 2 -name Dockerfile |
  sed -E 's#^\./([^/]+)/Dockerfile$#\1#' | sort | tr '\n' ' ' || true)
example_image() { echo "kubeflow-trainer-py/example-$1:$examples_version"; }
example_key() {
  recipe_key build_example build_with_wheels pip_download debian_base -- \
    $(cd "$repo" && find "examples/images/$1" -type f | sort)
}
EXAMPLE_IMAGES=$(for n in $example_names; do printf '%s ' "$(example_image "$n")"; done)
EXAMPLE_IMAGES=${EXAMPLE_IMAGES% }

# The stand-ins of upstream's e2e images: NAME FROM lines of test/e2e/upstream/images; a directory's image
# is keyed by its files.
upstream_list() { sed -e 's/#.*//' "$repo/test/e2e/upstream/images" | awk 'NF == 2 {print $1, $2}'; }
upstream_key() {
  recipe_key build_upstream_dir python_base debian_base -- $(cd "$repo" && find "test/e2e/upstream/$1" -type f | sort)
}
UPSTREAM_IMAGES=$(upstream_list | awk '{printf "%s ", $1}')
UPSTREAM_IMAGES=${UPSTREAM_IMAGES% }

if [[ "${1:-}" == "--print" ]]; then
  printf 'NODE_IMAGE=%s\nJOBSET_IMAGE=%s\nTRAINER_IMAGE=%s\nWORKLOAD_IMAGE=%s\nEXAMPLE_IMAGES="%s"\n' \
    "$NODE_IMAGE" "$JOBSET_IMAGE" "$TRAINER_IMAGE" "$WORKLOAD_IMAGE" "$EXAMPLE_IMAGES"
  printf 'PROMETHEUS_IMAGE=%s\nPLUGIN_IMAGE=%s\nUPSTREAM_IMAGES="%s"\n' "$PROMETHEUS_IMAGE" "$PLUGIN_IMAGE" "$UPSTREAM_IMAGES"
  printf 'PODNET_IMAGE=%s\n' "$PODNET_IMAGE"
  printf 'KUEUE_IMAGE=%s\nAGNHOST_IMAGE=%s\n' "$KUEUE_IMAGE" "$AGNHOST_IMAGE"
  printf 'SCHEDULER_PLUGINS_IMAGE=%s\nSCHEDULER_PLUGINS_CONTROLLER_IMAGE=%s\n' "$SCHEDULER_PLUGINS_IMAGE" \
    "$SCHEDULER_PLUGINS_CONTROLLER_IMAGE"
  printf 'VOLCANO_SCHEDULER_IMAGE=%s\nVOLCANO_CONTROLLER_IMAGE=%s\n' "$VOLCANO_SCHEDULER_IMAGE" "$VOLCANO_CONTROLLER_IMAGE"
  exit 0
fi

all="podnet node jobset manager plugin workload prometheus examples upstream kueue agnhost scheduler-plugins"
# Built only when named (hack/e2e-setup-kind.sh with VOLCANO=1): not part of the default kind tier.
optional="volcano"
only=" ${*:-$all} "
for n in "$@"; do [[ " $all $optional " == *" $n "* ]] || die "unknown image $n (one of: $all $optional)"; done
wanted() { [[ $only == *" $1 "* ]]; }

# -------------------------------------------------------------------------------------------------- build

docker info >/dev/null 2>&1 || die "no Docker engine answers (run hack/docker-engine.sh)"
eval "$(bash "$here/build-binaries.sh" --print)"
mkdir -p "$work" "$log_dir"

for n in $all $optional; do
  wanted "$n" || continue
  if [[ $n == examples ]]; then build_examples; continue; fi
  if [[ $n == upstream ]]; then build_upstream; say "upstream: $UPSTREAM_IMAGES"; continue; fi
  if [[ $n == agnhost ]]; then
    if exists "$agnhost_cached"; then say "agnhost: $agnhost_cached (cached)"; else timed agnhost build_agnhost; fi
    docker tag "$agnhost_cached" "$AGNHOST_IMAGE"
    continue
  fi
  case $n in
    podnet) image=$PODNET_IMAGE ;; node) image=$NODE_IMAGE ;; jobset) image=$JOBSET_IMAGE ;;
    manager) image=$TRAINER_IMAGE ;; plugin) image=$PLUGIN_IMAGE ;; workload) image=$WORKLOAD_IMAGE ;;
    prometheus) image=$PROMETHEUS_IMAGE ;; kueue) image=$KUEUE_IMAGE ;;
    scheduler-plugins) image=$SCHEDULER_PLUGINS_IMAGE ;;  # built after the controller's
    volcano) image=$VOLCANO_SCHEDULER_IMAGE ;;  # likewise
  esac
  if exists "$image"; then say "$n: $image (cached)"; continue; fi
  timed "$n" "build_${n//-/_}"
  say "$n: $image ($(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1 / 1e6}'))"
done
