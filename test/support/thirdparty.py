"""Locate the third-party CRDs the tests install, in the Go module cache, at run time.

Upstream kubeflow/trainer copies these CRDs into its repository (``manifests/external-crds``); we do not:
they are read from the pinned module versions (``hack/versions.env``; ``hack/tools/crds/go.mod`` records the
same modules) with ``go mod download -json <module>@<version>``, which downloads a module into the cache
only if it is not there yet and prints its directory. The CRDs:

- JobSet ``jobset.x-k8s.io/v1alpha2`` from ``sigs.k8s.io/jobset``;
- the scheduler-plugins PodGroup ``scheduling.x-k8s.io/v1alpha1`` from ``sigs.k8s.io/scheduler-plugins``
  (the PodGroup file only; the ElasticQuota CRD beside it is not installed);
- the Volcano PodGroup ``scheduling.volcano.sh/v1beta1``: generated, when ``VOLCANO_APIS_VERSION`` and
  ``CONTROLLER_TOOLS_VERSION`` are pinned, from the Go types of ``volcano.sh/apis`` (``PodGroupSpec`` with
  ``networkTopology`` since v1.13, what upstream trainer builds against) by controller-gen
  (``sigs.k8s.io/controller-tools``, run with ``go run``) into the cache directory, once per pair of
  versions (verified with ``VOLCANO_APIS_VERSION=v1.13.0``, ``CONTROLLER_TOOLS_VERSION=v0.18.0``: the
  v1.10.0 CRD plus ``spec.networkTopology`` and the ``queue`` default); otherwise copied from
  ``volcano.sh/volcano`` at ``VOLCANO_VERSION`` (v1.10.0, the newest release the Go module proxy serves,
  whose CRD predates ``networkTopology``). No third-party YAML is committed.

Kueue's CRDs and webhook manifests (``sigs.k8s.io/kueue`` at ``KUEUE_VERSION``), which ``support.kueue``
installs for a Kueue controller on the host, come from the module the binary is built from: the wrapper
module ``hack/tools/kueue`` (``go mod download -json sigs.k8s.io/kueue`` in it, verified against its
``go.sum``), whose pin must equal ``KUEUE_VERSION``; see :func:`kueue_manifests`.

Upstream kubeflow/trainer's own CRDs (``github.com/kubeflow/trainer/v2`` at ``TRAINER_VERSION``) are found the
same way, ``upstream_trainer_crd_dir()``: not installed, but compared with ours by ``test/unit/api``.

Use as a module (``crd_paths()``, or one function per CRD) or from the command line, which prints one path
a line::

    python hack/thirdparty.py

Without Go, or when the proxy cannot be reached, it fails with :class:`ThirdPartyError` (a one-line message
from the script, not a stack trace).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from controller.envtest.binaries import cache_directory

HACK = Path(__file__).resolve().parents[2] / "hack"
VERSIONS_FILE = HACK / "versions.env"


class ThirdPartyError(Exception):
    """Go is missing, the module cannot be downloaded, or the expected file is not in it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ThirdPartyCRD:
    """Where one CRD lives in a Go module: the module, its version variable and candidate paths in it."""

    name: str
    module: str
    version_key: str
    paths: tuple[str, ...]  # tried in order; the first one present wins


JOBSET = ThirdPartyCRD(
    name="jobsets.jobset.x-k8s.io",
    module="sigs.k8s.io/jobset",
    version_key="JOBSET_VERSION",
    paths=("config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",),
)
SCHEDULER_PLUGINS_PODGROUP = ThirdPartyCRD(
    name="podgroups.scheduling.x-k8s.io",
    module="sigs.k8s.io/scheduler-plugins",
    version_key="SCHEDULER_PLUGINS_VERSION",
    # The controller-gen output holds the PodGroup alone; the coscheduling manifest is the copy upstream
    # trainer uses, kept as a fallback for versions that lack the first.
    paths=("config/crd/bases/scheduling.x-k8s.io_podgroups.yaml", "manifests/coscheduling/crd.yaml"),
)
VOLCANO_PODGROUP = ThirdPartyCRD(
    name="podgroups.scheduling.volcano.sh",
    module="volcano.sh/volcano",
    version_key="VOLCANO_VERSION",
    paths=("config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml",),
)
ALL = (JOBSET, SCHEDULER_PLUGINS_PODGROUP, VOLCANO_PODGROUP)
"""The CRDs found as files in their modules (the Volcano PodGroup is generated instead when it can be)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GeneratedCRD:
    """A CRD that controller-gen makes from one Go package of a module (its ``+kubebuilder`` markers)."""

    name: str
    module: str
    version_key: str
    package: str
    file: str  # the file controller-gen writes for it
    generator_key: str = "CONTROLLER_TOOLS_VERSION"


VOLCANO_PODGROUP_FROM_TYPES = GeneratedCRD(
    name="podgroups.scheduling.volcano.sh",
    module="volcano.sh/apis",
    version_key="VOLCANO_APIS_VERSION",
    package="volcano.sh/apis/pkg/apis/scheduling/v1beta1",
    file="scheduling.volcano.sh_podgroups.yaml",
)
CONTROLLER_GEN = "sigs.k8s.io/controller-tools/cmd/controller-gen"


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """Parse ``KEY=value`` lines (``#`` comments, blank lines and trailing comments allowed)."""
    versions: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        key, sep, value = raw.split("#", 1)[0].strip().partition("=")
        if sep and key.strip():
            versions[key.strip()] = value.strip().strip("'\"")
    return versions


def _go(args: list[str], cwd: Path, what: str) -> None:
    """Run ``go <args>`` in ``cwd`` (its own module, no workspace); a failure is a ThirdPartyError."""
    go = shutil.which("go")
    if go is None:
        raise ThirdPartyError(f"Go is not installed: {what} needs it (install go >= 1.26)")
    env = dict(os.environ, GOWORK="off", GOFLAGS=f"{os.environ.get('GOFLAGS', '')} -mod=mod".strip())
    try:
        done = subprocess.run(
            [go, *args], capture_output=True, text=True, check=False, timeout=900, cwd=cwd, env=env
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ThirdPartyError(f"{what}: `go {' '.join(args)}` could not run: {exc}") from exc
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1].strip()
        raise ThirdPartyError(f"{what}: `go {' '.join(args)}` failed: {detail}")


def generated_crd_path(crd: GeneratedCRD, versions: dict[str, str]) -> Path:
    """The file controller-gen makes for ``crd`` at the pinned versions, generated on first use.

    The result is cached under ``<cache>/crds/<module>@<version>+controller-gen@<version>/``; a run writes
    into a private directory and renames the file into place, so concurrent runs cannot see half a file.
    """
    version, generator = versions[crd.version_key], versions[crd.generator_key]
    target_dir = (
        cache_directory() / "crds" / f"{crd.module.replace('/', '_')}@{version}+controller-gen@{generator}"
    )
    target = target_dir / crd.file
    if target.is_file():
        return target
    target_dir.parent.mkdir(parents=True, exist_ok=True)
    what = f"generating the {crd.name} CRD from {crd.module}@{version}"
    with tempfile.TemporaryDirectory(dir=target_dir.parent, prefix=".generate-") as work:
        workdir = Path(work)
        # A throwaway module that requires the API module, so controller-gen can load the package.
        (workdir / "go.mod").write_text("module example.invalid/crdgen\n\ngo 1.24.0\n")
        _go(["get", f"{crd.module}@{version}"], workdir, what)
        out = workdir / "out"
        _go(
            ["run", f"{CONTROLLER_GEN}@{generator}", "crd", f"paths={crd.package}", f"output:crd:dir={out}"],
            workdir,
            what,
        )
        if not (out / crd.file).is_file():
            raise ThirdPartyError(f"{what}: controller-gen wrote no {crd.file}")
        target_dir.mkdir(exist_ok=True)
        os.replace(out / crd.file, target)
    return target


def volcano_podgroup_source(versions: dict[str, str]) -> GeneratedCRD | ThirdPartyCRD:
    """Where the Volcano PodGroup CRD comes from with these pins: generated when both are pinned."""
    generated = VOLCANO_PODGROUP_FROM_TYPES
    if generated.version_key in versions and generated.generator_key in versions:
        return generated
    return VOLCANO_PODGROUP


def module_dir(module: str, version: str) -> Path:
    """The directory of ``module@version`` in the Go module cache, downloading it first if needed."""
    go = shutil.which("go")
    if go is None:
        raise ThirdPartyError(
            "Go is not installed: the third-party CRDs are read from the Go module cache "
            "(install go >= 1.26; see docs/development.md)"
        )
    env = dict(os.environ, GOWORK="off")
    try:
        # Outside any module, so no go.mod or go.sum is consulted or touched.
        done = subprocess.run(
            [go, "mod", "download", "-json", f"{module}@{version}"],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
            cwd=tempfile.gettempdir(),
            env=env,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ThirdPartyError(f"`go mod download {module}@{version}` could not run: {exc}") from exc
    try:
        info = json.loads(done.stdout) if done.stdout.strip() else {}
    except json.JSONDecodeError as exc:
        raise ThirdPartyError(f"`go mod download -json {module}@{version}` printed no JSON") from exc
    if done.returncode != 0 or info.get("Error") or not info.get("Dir"):
        detail = info.get("Error") or done.stderr.strip() or f"exit status {done.returncode}"
        raise ThirdPartyError(
            f"cannot download {module}@{version} (is the Go module proxy reachable? "
            f"see `go env GOPROXY`): {detail}"
        )
    return Path(info["Dir"])


def crd_path(crd: ThirdPartyCRD, versions: dict[str, str] | None = None) -> Path:
    """The file holding ``crd`` in its pinned module version."""
    pinned = read_versions() if versions is None else versions
    if crd.version_key not in pinned:
        raise ThirdPartyError(f"{crd.version_key} is not set in {VERSIONS_FILE}")
    directory = module_dir(crd.module, pinned[crd.version_key])
    for relative in crd.paths:
        if (directory / relative).is_file():
            return directory / relative
    raise ThirdPartyError(f"{crd.module}@{pinned[crd.version_key]} has none of {list(crd.paths)}")


def jobset_crd() -> Path:
    return crd_path(JOBSET)


UPSTREAM_TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
UPSTREAM_TRAINER_CRD_DIR = "manifests/base/crds"


def upstream_trainer_crd_dir(versions: dict[str, str] | None = None) -> Path:
    """Upstream kubeflow/trainer's own generated CRDs at ``TRAINER_VERSION``, the release this project ports.

    Not installed anywhere: ``test/unit/api`` compares our generated CRDs with them.
    """
    pinned = read_versions() if versions is None else versions
    if "TRAINER_VERSION" not in pinned:
        raise ThirdPartyError(f"TRAINER_VERSION is not set in {VERSIONS_FILE}")
    directory = module_dir(UPSTREAM_TRAINER_MODULE, pinned["TRAINER_VERSION"]) / UPSTREAM_TRAINER_CRD_DIR
    if not directory.is_dir():
        raise ThirdPartyError(
            f"{UPSTREAM_TRAINER_MODULE}@{pinned['TRAINER_VERSION']} has no {UPSTREAM_TRAINER_CRD_DIR}"
        )
    return directory


def scheduler_plugins_podgroup_crd() -> Path:
    return crd_path(SCHEDULER_PLUGINS_PODGROUP)


def volcano_podgroup_crd(versions: dict[str, str] | None = None) -> Path:
    pinned = read_versions() if versions is None else versions
    source = volcano_podgroup_source(pinned)
    if isinstance(source, GeneratedCRD):
        return generated_crd_path(source, pinned)
    return crd_path(source, pinned)


KUEUE_MODULE = "sigs.k8s.io/kueue"
KUEUE_WRAPPER = HACK / "tools" / "kueue"
"""The module hack/build-binaries.sh builds the ``kueue`` binary in (its go.mod and go.sum pin Kueue)."""
KUEUE_CRD_DIR = "config/components/crd/bases"
KUEUE_WEBHOOK_MANIFESTS = "config/components/webhook/manifests.yaml"


@dataclass(frozen=True, slots=True, kw_only=True)
class KueueManifests:
    """Where Kueue's own install manifests are, in the module the binary was built from."""

    version: str
    module_dir: Path
    crds: tuple[Path, ...]
    """Every CRD of ``config/components/crd/bases``, sorted by file name (no conversion-webhook patches)."""
    webhooks: Path
    """``config/components/webhook/manifests.yaml``: every webhook the binary serves, Service-addressed."""


def wrapper_module_dir(wrapper: Path, module: str, version: str) -> Path:
    """``module``'s directory in the Go module cache, as the wrapper module ``wrapper`` pins it.

    ``go mod download -json <module>`` runs inside the wrapper, so the version is the one its go.mod requires
    and the download is checked against its go.sum. That version must be ``version`` (the pin in
    ``versions.env``): otherwise the binary and the manifests could come from different releases.
    """
    go = shutil.which("go")
    if go is None:
        raise ThirdPartyError(f"Go is not installed: {module}'s manifests are read from the Go module cache")
    env = dict(os.environ, GOWORK="off", GOFLAGS=f"{os.environ.get('GOFLAGS', '')} -mod=mod".strip())
    argv = [go, "mod", "download", "-json", module]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, check=False, timeout=600, cwd=wrapper, env=env
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ThirdPartyError(f"`go mod download {module}` in {wrapper} could not run: {exc}") from exc
    try:
        info = json.loads(done.stdout) if done.stdout.strip() else {}
    except json.JSONDecodeError as exc:
        raise ThirdPartyError(f"`go mod download -json {module}` in {wrapper} printed no JSON") from exc
    if done.returncode != 0 or info.get("Error") or not info.get("Dir"):
        detail = info.get("Error") or done.stderr.strip() or f"exit status {done.returncode}"
        raise ThirdPartyError(f"cannot download {module} as {wrapper}/go.mod pins it: {detail}")
    if info.get("Version") != version:
        raise ThirdPartyError(
            f"{wrapper}/go.mod pins {module}@{info.get('Version')} but {VERSIONS_FILE.name} says {version}: "
            "update the wrapper (hack/tools/update-wrappers.sh) or the pin"
        )
    return Path(info["Dir"])


def kueue_manifests(
    versions: dict[str, str] | None = None, *, wrapper: Path = KUEUE_WRAPPER
) -> KueueManifests:
    """Kueue's CRDs and webhook manifests at ``KUEUE_VERSION``, from the wrapper module's pinned download."""
    pinned = read_versions() if versions is None else versions
    if "KUEUE_VERSION" not in pinned:
        raise ThirdPartyError(f"KUEUE_VERSION is not set in {VERSIONS_FILE}")
    version = pinned["KUEUE_VERSION"]
    directory = wrapper_module_dir(wrapper, KUEUE_MODULE, version)
    crds = tuple(sorted((directory / KUEUE_CRD_DIR).glob("*.yaml")))
    webhooks = directory / KUEUE_WEBHOOK_MANIFESTS
    if not crds:
        raise ThirdPartyError(f"{KUEUE_MODULE}@{version} has no CRDs in {KUEUE_CRD_DIR}")
    if not webhooks.is_file():
        raise ThirdPartyError(f"{KUEUE_MODULE}@{version} has no {KUEUE_WEBHOOK_MANIFESTS}")
    return KueueManifests(version=version, module_dir=directory, crds=crds, webhooks=webhooks)


def crd_paths() -> list[Path]:
    """Every third-party CRD file the tests install, in a fixed order."""
    versions = read_versions()
    return [
        crd_path(JOBSET, versions),
        crd_path(SCHEDULER_PLUGINS_PODGROUP, versions),
        volcano_podgroup_crd(versions),
    ]


def main() -> int:
    try:
        paths = crd_paths()
    except ThirdPartyError as exc:
        print(f"thirdparty: error: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0
