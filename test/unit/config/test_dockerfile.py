"""The ``Dockerfile`` at the repository root: it parses, and it names what the image needs. No image is
built here (no container engine): the checks are on the instructions.

A small parser of our own (the Dockerfile reference's syntax, the part this file uses): ``#`` comment lines,
``\\`` line continuations, one instruction per logical line, JSON (exec) or shell form arguments.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"
CONSTRAINTS = ROOT / "requirements" / "manager.txt"
_INSTRUCTIONS = frozenset(
    {
        "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
        "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR",
    }
)  # fmt: skip


class DockerfileError(ValueError):
    """The text is not a Dockerfile this parser reads; the message names the line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Instruction:
    line: int
    keyword: str
    value: str

    def exec_form(self) -> list[str] | None:
        """The JSON array of ``CMD``/``ENTRYPOINT``/``RUN ["..."]``, or None for the shell form."""
        if not self.value.startswith("["):
            return None
        parsed = json.loads(self.value)
        if not isinstance(parsed, list) or not all(isinstance(x, str) for x in parsed):
            raise DockerfileError(f"line {self.line}: {self.keyword} is not a JSON array of strings")
        return parsed


def parse(text: str) -> list[Instruction]:
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # comment lines inside a continuation are dropped, as Docker does
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        logical = " ".join(part for part in pending if part)
        pending = []
        keyword, _, value = logical.partition(" ")
        if keyword.upper() not in _INSTRUCTIONS:
            raise DockerfileError(f"line {start}: unknown instruction {keyword!r}")
        if keyword != keyword.upper():
            raise DockerfileError(f"line {start}: write instructions in upper case ({keyword!r})")
        instructions.append(Instruction(line=start, keyword=keyword, value=value.strip()))
    if pending:
        raise DockerfileError("the file ends inside a line continuation")
    if not instructions or instructions[0].keyword not in ("FROM", "ARG"):
        raise DockerfileError("a Dockerfile starts with FROM (or ARG)")
    return instructions


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def final_stage(instructions: list[Instruction]) -> list[Instruction]:
    starts = [i for i, ins in enumerate(instructions) if ins.keyword == "FROM"]
    return instructions[starts[-1] :]


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in CONSTRAINTS.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", f"{line}: pin an exact version"
            pins[canonicalize_name(requirement.name)] = spec.version
    return pins


# The parser itself --------------------------------------------------------------------------------------


def test_the_parser_joins_continuations_and_skips_comments() -> None:
    parsed = parse('# hi\nFROM a:1 AS b\nRUN one \\\n  # inside\n  two\nENTRYPOINT ["x", "y"]\n')
    assert [(i.keyword, i.value) for i in parsed] == [
        ("FROM", "a:1 AS b"),
        ("RUN", "one two"),
        ("ENTRYPOINT", '["x", "y"]'),
    ]
    assert parsed[2].exec_form() == ["x", "y"] and parsed[1].exec_form() is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("FROM a:1\nFROB x\n", "line 2: unknown instruction 'FROB'"),
        ("FROM a:1\nrun x\n", "upper case"),
        ("FROM a:1\nRUN x \\\n", "continuation"),
        ("RUN x\n", "starts with FROM"),
    ],
)
def test_the_parser_refuses_what_is_not_a_dockerfile(text: str, error: str) -> None:
    with pytest.raises(DockerfileError, match=re.escape(error)):
        parse(text)


# What the image needs -----------------------------------------------------------------------------------


def test_every_base_image_is_a_slim_python_pinned_to_a_patch_version(instructions: list[Instruction]) -> None:
    # Both stages start from BASE_IMAGE (hack/build-images.sh passes a Debian Python base where no registry
    # is reachable); its default, what `docker build .` uses, is the pinned slim Python.
    defaults = dict(
        ins.value.partition("=")[::2] for ins in instructions if ins.keyword == "ARG" and "=" in ins.value
    )
    froms = [ins.value.split()[0] for ins in instructions if ins.keyword == "FROM"]
    assert froms == ["${BASE_IMAGE}", "${BASE_IMAGE}"]  # build, then run
    for base in [defaults["BASE_IMAGE"]]:
        repository, _, tag = base.partition(":")
        assert repository == "python", base
        pinned = re.fullmatch(r"3\.\d+\.\d+-slim-[a-z]+", tag)
        assert pinned, f"{base}: pin the Python patch version and the distribution"


def test_no_image_reference_uses_latest(instructions: list[Instruction]) -> None:
    text = " ".join(ins.value for ins in instructions)
    assert ":latest" not in text


def test_the_image_runs_as_the_deployments_non_root_user(final_stage: list[Instruction]) -> None:
    (user,) = [ins for ins in final_stage if ins.keyword == "USER"]
    uid, _, gid = user.value.partition(":")
    assert uid.isdigit() and int(uid) != 0, "a numeric, non-root UID (runAsNonRoot can check only numbers)"
    deployment = yaml.safe_load((ROOT / "config" / "manager" / "deployment.yaml").read_text())
    pod_context = deployment["spec"]["template"]["spec"]["securityContext"]
    assert int(uid) == pod_context["runAsUser"]
    assert int(gid) == pod_context["runAsGroup"]
    # USER comes after every RUN: nothing at run time is done as root.
    assert max(i for i, ins in enumerate(final_stage) if ins.keyword == "RUN") < final_stage.index(user)


def test_the_entrypoint_is_the_managers_console_script(
    final_stage: list[Instruction], pyproject: dict[str, Any]
) -> None:
    (entrypoint,) = [ins for ins in final_stage if ins.keyword == "ENTRYPOINT"]
    assert entrypoint.exec_form() == ["trainer-controller-manager"]
    assert "trainer-controller-manager" in pyproject["project"]["scripts"]
    (cmd,) = [ins for ins in final_stage if ins.keyword == "CMD"]
    assert cmd.exec_form() == ["--config=/controller_manager_config.yaml"]


def test_the_package_is_installed_at_its_version_from_the_pinned_wheels(
    final_stage: list[Instruction], pyproject: dict[str, Any]
) -> None:
    project = pyproject["project"]
    installs = [
        shlex.split(ins.value) for ins in final_stage if ins.keyword == "RUN" and "pip install" in ins.value
    ]
    (words,) = installs
    assert f"{project['name']}=={project['version']}" in words
    assert "--no-index" in words  # only the wheels built from this tree and the constraints
    assert words[words.index("--constraint") + 1] == "/tmp/constraints.txt"
    copied = [ins.value.split() for ins in final_stage if ins.keyword == "COPY"]
    assert ["requirements/manager.txt", "/tmp/constraints.txt"] in copied


def test_every_runtime_dependency_is_pinned_within_its_range(pyproject: dict[str, Any]) -> None:
    pins = _pins()
    for dependency in pyproject["project"]["dependencies"]:
        requirement = Requirement(dependency)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not pinned in {CONSTRAINTS.relative_to(ROOT)}"
        assert requirement.specifier.contains(pins[name]), f"{name}=={pins[name]} is outside {requirement}"
    build_requires = [Requirement(r) for r in pyproject["build-system"]["requires"]]
    for requirement in build_requires:
        name = canonicalize_name(requirement.name)
        assert name in pins and requirement.specifier.contains(pins[name]), name


def test_the_build_stage_copies_every_package_the_wheel_holds(instructions: list[Instruction]) -> None:
    copied = {
        ins.value.split()[0] for ins in instructions if ins.keyword == "COPY" and "--from" not in ins.value
    }
    # setuptools finds controller*, runtime* and trainer_controller_manager (under cmd/); runtime/crds
    # links to config/crd.
    assert {"controller", "runtime", "cmd", "config/crd", "pyproject.toml"} <= copied
    dockerignore = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in dockerignore and ".git" in dockerignore
