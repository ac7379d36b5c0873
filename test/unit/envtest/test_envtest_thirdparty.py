"""support.thirdparty: pinned versions, path choice in a module, and clear errors without Go."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from support import thirdparty as _thirdparty

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def thirdparty() -> ModuleType:
    return _thirdparty


def test_versions_file_parsing_ignores_comments_and_blank_lines(
    thirdparty: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "versions.env"
    path.write_text("# header\n\nA=v1.2.3\nB=v0.1.0   # trailing note\nC='v2'\nnot a pair\n")
    assert thirdparty.read_versions(path) == {"A": "v1.2.3", "B": "v0.1.0", "C": "v2"}


def test_the_pinned_versions_file_names_every_crd_module(thirdparty: ModuleType) -> None:
    versions = thirdparty.read_versions()
    assert {crd.version_key for crd in thirdparty.ALL} <= set(versions)


def test_the_first_candidate_path_present_in_the_module_wins(
    thirdparty: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fallback = tmp_path / "manifests" / "coscheduling" / "crd.yaml"
    fallback.parent.mkdir(parents=True)
    fallback.write_text("kind: CustomResourceDefinition\n")
    monkeypatch.setattr(thirdparty, "module_dir", lambda module, version: tmp_path)
    crd = thirdparty.SCHEDULER_PLUGINS_PODGROUP
    assert thirdparty.crd_path(crd, {crd.version_key: "v0.0.1"}) == fallback
    preferred = tmp_path / crd.paths[0]
    preferred.parent.mkdir(parents=True)
    preferred.write_text("kind: CustomResourceDefinition\n")
    assert thirdparty.crd_path(crd, {crd.version_key: "v0.0.1"}) == preferred


def test_a_module_without_the_file_is_a_clear_error(
    thirdparty: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thirdparty, "module_dir", lambda module, version: tmp_path)
    crd = thirdparty.VOLCANO_PODGROUP
    with pytest.raises(thirdparty.ThirdPartyError, match=r"volcano.sh/volcano@v9 has none of"):
        thirdparty.crd_path(crd, {crd.version_key: "v9"})


def test_an_unpinned_module_is_a_clear_error(thirdparty: ModuleType) -> None:
    with pytest.raises(thirdparty.ThirdPartyError, match="JOBSET_VERSION is not set"):
        thirdparty.crd_path(thirdparty.JOBSET, {})


def test_without_go_the_error_says_so(thirdparty: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(thirdparty.shutil, "which", lambda name: None)
    with pytest.raises(thirdparty.ThirdPartyError, match="Go is not installed"):
        thirdparty.module_dir("sigs.k8s.io/jobset", "v0.12.0")


def test_the_script_prints_one_line_instead_of_a_traceback(
    thirdparty: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(thirdparty.shutil, "which", lambda name: None)
    assert thirdparty.main() == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("thirdparty: error: Go is not installed") and err.count("\n") == 1


def test_the_generated_volcano_crd_is_made_once_then_served_from_the_cache_without_go(
    thirdparty: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh CI clone generates it on first use; every later use (other fixtures, cluster.py) reads the
    # cached file, even with Go gone.
    monkeypatch.setenv("TRAINER_CACHE_DIR", str(tmp_path / "cache"))
    crd = thirdparty.VOLCANO_PODGROUP_FROM_TYPES

    def fake_go(args: list[str], cwd: Path, what: str) -> None:
        if args[0] == "run":  # controller-gen: writes the CRD into output:crd:dir
            out = Path(args[-1].removeprefix("output:crd:dir="))
            out.mkdir()
            (out / crd.file).write_text("kind: CustomResourceDefinition\n")

    monkeypatch.setattr(thirdparty, "_go", fake_go)
    pins = {crd.version_key: "v1.13.0", crd.generator_key: "v0.18.0"}
    first = thirdparty.volcano_podgroup_crd(pins)
    assert first.read_text() == "kind: CustomResourceDefinition\n"
    assert [p.name for p in first.parent.parent.iterdir()] == [first.parent.name]  # no work dir left

    monkeypatch.setattr(thirdparty, "_go", lambda args, cwd, what: pytest.fail("Go ran again"))
    monkeypatch.setattr(thirdparty.shutil, "which", lambda name: None)
    assert thirdparty.volcano_podgroup_crd(pins) == first


def test_a_failed_generation_names_the_step_and_leaves_nothing_in_the_cache(
    thirdparty: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GOPROXY", "off")
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "empty-module-cache"))
    if thirdparty.shutil.which("go") is None:
        pytest.skip("needs go on PATH (it runs `go get` against a proxy that is off)")
    crd = thirdparty.VOLCANO_PODGROUP_FROM_TYPES
    with pytest.raises(thirdparty.ThirdPartyError) as raised:
        thirdparty.volcano_podgroup_crd({crd.version_key: "v1.13.0", crd.generator_key: "v0.18.0"})
    message = str(raised.value)
    assert message.startswith(
        "generating the podgroups.scheduling.volcano.sh CRD from volcano.sh/apis@v1.13.0"
    )
    assert "go get volcano.sh/apis@v1.13.0" in message and "GOPROXY=off" in message
    assert list((tmp_path / "cache" / "crds").iterdir()) == []
