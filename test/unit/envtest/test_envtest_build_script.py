"""hack/build-binaries.sh on a fresh machine: no cache directory, no Go, an unreachable proxy, an interrupt.

Go is replaced by a stub script on ``PATH`` (and ``df`` by one that reports plenty of room), so these run in
milliseconds and never build anything.
"""

from __future__ import annotations

import signal
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "hack" / "build-binaries.sh"


def _stub(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """A directory for stubs, first on PATH; ``df`` reports 100 GiB free everywhere."""
    directory = tmp_path / "stubs"
    directory.mkdir()
    _stub(
        directory,
        "df",
        'echo "Filesystem 1024-blocks Used Available Capacity Mounted"\necho "x 0 0 104857600 0% /"\n',
    )
    return directory


def _fake_go(fake_bin: Path, tmp_path: Path, *, download: str = "exit 0", build: str = "exit 0") -> None:
    # The pause binary is compiled from the Kubernetes module's C source by gcc, tagged with the version
    # kubeadm's constants name: both files stand in the fake module directory, gcc and strip are stubs.
    module = tmp_path / "gopath" / "pkg" / "mod" / "k8s.io" / "kubernetes"
    (module / "build" / "pause" / "linux").mkdir(parents=True, exist_ok=True)
    (module / "build" / "pause" / "linux" / "pause.c").write_text("int main(void) { return 0; }\n")
    constants = module / "cmd" / "kubeadm" / "app" / "constants"
    constants.mkdir(parents=True, exist_ok=True)
    (constants / "constants.go").write_text('\tPauseVersion = "3.10.1"\n')
    _stub(
        fake_bin,
        "gcc",
        'while (( $# )); do if [[ $1 == -o ]]; then : > "$2"; chmod +x "$2"; fi; shift; done\n',
    )
    _stub(fake_bin, "strip", "exit 0\n")
    _stub(
        fake_bin,
        "go",
        f"""case "$1 $2" in
  "env GOVERSION") echo go1.26.0 ;;
  "env GOMODCACHE") echo {tmp_path}/gopath/pkg/mod ;;
  "env GOCACHE") echo {tmp_path}/gocache/build ;;
  "env GOPROXY") echo https://proxy.invalid ;;
  "mod download") {download} ;;
  "list -m") echo {tmp_path}/gopath/pkg/mod/k8s.io/kubernetes ;;
  build*|"test -c") {build} ;;
  *) echo "unexpected: go $*" >&2; exit 2 ;;
esac
""",
    )


def _run(fake_bin: Path, cache: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        env={
            "PATH": f"{fake_bin}:/usr/bin:/bin",
            "HOME": str(cache.parent),
            "TRAINER_CACHE_DIR": str(cache),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        start_new_session=True,  # the interrupt test signals the script's whole process group
    )


def test_print_names_the_directories_without_creating_the_cache(fake_bin: Path, tmp_path: Path) -> None:
    cache = tmp_path / "fresh-cache"
    done = _run(fake_bin, cache, "--print")
    assert done.returncode == 0, done.stderr
    assert f"ETCD_BIN={cache}/bin/etcd-" in done.stdout
    assert not cache.exists()


def test_without_go_the_script_fails_with_one_clear_line(fake_bin: Path, tmp_path: Path) -> None:
    cache = tmp_path / "fresh-cache"
    done = _run(fake_bin, cache)
    assert done.returncode == 1
    assert (
        done.stderr.startswith("build-binaries: error: Go is not installed") and done.stderr.count("\n") == 1
    )
    assert not cache.exists()


def test_an_unreachable_proxy_is_named_before_any_build(fake_bin: Path, tmp_path: Path) -> None:
    _fake_go(fake_bin, tmp_path, download='echo "dial tcp: connection refused" >&2; exit 1')
    cache = tmp_path / "fresh-cache"
    done = _run(fake_bin, cache)
    assert done.returncode == 1
    assert "is the Go module proxy reachable? GOPROXY=https://proxy.invalid" in done.stderr
    assert "connection refused" in (cache / "build-logs" / "proxy-check.log").read_text()
    assert sorted(p.name for p in (cache / "bin").iterdir()) == []


def test_a_stalled_proxy_is_reported_after_the_check_timeout(fake_bin: Path, tmp_path: Path) -> None:
    _fake_go(fake_bin, tmp_path, download="exec sleep 30")
    cache = tmp_path / "fresh-cache"
    done = _run(fake_bin, cache, TRAINER_PROXY_CHECK_TIMEOUT="0.2")
    assert done.returncode == 1
    assert "the Go module proxy did not answer within 0.2 s" in done.stderr


def test_an_interrupted_build_leaves_no_directory_behind(fake_bin: Path, tmp_path: Path) -> None:
    # The first `go build` is interrupted as Ctrl-C would: SIGINT to the whole process group.
    _fake_go(fake_bin, tmp_path, build="kill -INT 0; exit 130")
    cache = tmp_path / "fresh-cache"
    done = _run(fake_bin, cache)
    assert done.returncode == 128 + signal.SIGINT, done.stderr
    assert sorted(p.name for p in (cache / "bin").iterdir()) == []


def test_a_failed_build_leaves_no_directory_behind_and_shows_the_log_tail(
    fake_bin: Path, tmp_path: Path
) -> None:
    _fake_go(fake_bin, tmp_path, build='echo "compile error in etcd" >&2; exit 1')
    cache = tmp_path / "fresh-cache"
    done = _run(fake_bin, cache)
    assert done.returncode == 1
    assert "compile error in etcd" in done.stderr and "building etcd failed" in done.stderr
    assert sorted(p.name for p in (cache / "bin").iterdir()) == []


def test_a_build_fills_each_versioned_directory_atomically(fake_bin: Path, tmp_path: Path) -> None:
    # The stub "builds" by creating the executables the script expects in $OUT.
    _fake_go(
        fake_bin,
        tmp_path,
        build="for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl "
        'jobset helm; do : > "$OUT/$b"; chmod +x "$OUT/$b"; done',
    )
    cache = tmp_path / "fresh-cache"
    done = _run(fake_bin, cache)
    assert done.returncode == 0, done.stderr
    # Every directory it prints, but Volcano's: that component is built only when named.
    assert sorted(p.name for p in (cache / "bin").iterdir()) == sorted(
        line.split("=", 1)[1].rsplit("/", 1)[1]
        for line in done.stdout.splitlines()
        if not line.startswith("VOLCANO_BIN=")
    )


def test_named_components_are_the_only_ones_built(fake_bin: Path, tmp_path: Path) -> None:
    _fake_go(fake_bin, tmp_path, build=': > "$OUT/helm"; chmod +x "$OUT/helm"')
    cache = tmp_path / "fresh-cache"
    done = _run(fake_bin, cache, "helm")
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (cache / "bin").iterdir()] == [
        line.split("=", 1)[1].rsplit("/", 1)[1]
        for line in done.stdout.splitlines()
        if line.startswith("HELM_BIN=")
    ]
    assert _run(fake_bin, cache, "helm").stderr == ""  # present: nothing to build, no preflight


def test_an_unknown_component_is_refused(fake_bin: Path, tmp_path: Path) -> None:
    done = _run(fake_bin, tmp_path / "fresh-cache", "kubectl")
    assert done.returncode == 1
    assert done.stderr == "build-binaries: error: unknown component kubectl\n"
