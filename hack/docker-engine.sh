#!/usr/bin/env bash
# A Docker engine for the kind tier: use the one that answers, or install and start one.
#
#   hack/docker-engine.sh          make sure `docker info` answers (install Debian's docker.io and start
#                                  dockerd when needed), then print the engine's version
#   hack/docker-engine.sh --stop   stop the dockerd this script started (an engine it did not start is
#                                  left alone)
#
# An engine that already answers (Docker Desktop, a systemd unit, one started earlier by this script) is used
# as it is. Otherwise, as root on a Debian-like machine, `apt-get install docker.io` provides dockerd, and this
# script starts it in the background with a configuration file of its own (<cache>/docker/daemon.json), its
# log in <cache>/docker/dockerd.log. Where the machine's capability bounding set lacks CAP_SYS_RESOURCE (some
# sandboxes), that configuration makes hack/kind/runc-capfilter the default OCI runtime, since runc refuses
# privileged containers there; on an ordinary machine dockerd runs with its defaults. dockerd's own
# oom_score_adj is left at the parent's value for the same reason.
#
# <cache> is ${TRAINER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeflow-trainer-py}, as for the binaries.
# DOCKER_ENGINE_TIMEOUT (default 120) bounds the wait for a started dockerd to answer.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${TRAINER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeflow-trainer-py}
state="$cache/docker"
timeout=${DOCKER_ENGINE_TIMEOUT:-120}

die() { echo "docker-engine: error: $*" >&2; exit 1; }
say() { echo "docker-engine: $*" >&2; }

answers() { docker info >/dev/null 2>&1; }

if [[ "${1:-}" == "--stop" ]]; then
  if [[ -f "$state/dockerd.pid" ]] && kill -0 "$(cat "$state/dockerd.pid")" 2>/dev/null; then
    pid=$(cat "$state/dockerd.pid")
    kill "$pid"
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && die "dockerd (pid $pid) did not stop within 30 s"
    say "stopped dockerd (pid $pid)"
  else
    say "no dockerd started by this script is running"
  fi
  rm -f "$state/dockerd.pid"
  exit 0
fi
[[ $# -eq 0 ]] || die "unknown argument: $1 (usage: $0 [--stop])"

if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1; then
  if answers; then :; else
    [[ $(id -u) -eq 0 ]] || die "no Docker engine answers and dockerd is not installed; install Docker" \
      "(Debian: apt-get install docker.io) or run this script as root to have it installed"
    command -v apt-get >/dev/null 2>&1 || die "no Docker engine answers and this is not a Debian-like" \
      "machine (no apt-get); install Docker and start it"
    say "installing Debian's docker.io (dockerd, containerd, runc)"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq docker.io jq >"$cache/docker-install.log" 2>&1; then
      apt-get update -qq >>"$cache/docker-install.log" 2>&1 || true
      apt-get install -y -qq docker.io jq >>"$cache/docker-install.log" 2>&1 \
        || die "apt-get install docker.io failed; see $cache/docker-install.log"
    fi
  fi
fi

if ! answers; then
  mkdir -p "$state"
  if [[ -S /var/run/docker.sock ]] && ! [[ -f "$state/dockerd.pid" ]] && pgrep -x dockerd >/dev/null; then
    die "a dockerd is running but does not answer on /var/run/docker.sock (is it starting, or stuck?);" \
      "see its log, or stop it and run this script again"
  fi
  command -v jq >/dev/null 2>&1 || die "jq is needed by hack/kind/runc-capfilter (Debian: apt-get install jq)"
  bnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
  if (( (16#$bnd >> 24) & 1 )); then
    echo '{}' >"$state/daemon.json"
  else
    # The wrapper is copied out of the checkout: the engine outlives it (CI clones into a new folder).
    install -m 0755 "$here/kind/runc-capfilter" "$state/runc-capfilter"
    jq -n --arg path "$state/runc-capfilter" \
      '{runtimes: {capfilter: {path: $path}}, "default-runtime": "capfilter"}' >"$state/daemon.json"
    say "CAP_SYS_RESOURCE is not in this machine's bounding set: runc runs through $state/runc-capfilter"
  fi
  say "starting dockerd (log: $state/dockerd.log)"
  # setsid: the engine is not a child of this shell's session, so it outlives make and pytest.
  setsid dockerd --config-file "$state/daemon.json" --oom-score-adjust=0 --pidfile "$state/dockerd.pid" \
    >"$state/dockerd.log" 2>&1 </dev/null &
  deadline=$((SECONDS + timeout))
  until answers; do
    if ! kill -0 $! 2>/dev/null && ! answers; then
      tail -n 20 "$state/dockerd.log" >&2
      die "dockerd exited; see $state/dockerd.log"
    fi
    (( SECONDS < deadline )) || die "dockerd did not answer within $timeout s; see $state/dockerd.log"
    sleep 0.5
  done
fi
docker version --format 'docker-engine: engine {{.Server.Version}} (API {{.Server.APIVersion}})' >&2
