"""A tampered runtime snapshot fails its one TrainJob with a clear `SnapshotError`, in bounded time, memory.

The snapshot ConfigMap lives in the tenant's namespace, so the tenant can write anything into it. Every
case below must end in `SnapshotError` from `read_snapshot` and from `new_objects` (which the controller
turns into a Failed condition and a Warning event for that TrainJob), never another exception, a hang or
unbounded memory in the shared manager. The bounded cases run in a fresh interpreter limited to 1 GiB of
address space and a timeout, so the bound is the test's, not luck's.
"""

from __future__ import annotations

import functools
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import kubeyaml
from runtime.api import constants
from runtime.api.gojson import go_json_training_runtime
from runtime.core import SnapshotError
from runtime.core.snapshot import MAX_SNAPSHOT_NODES, SHARED_MAX_NODES, build_snapshot, read_snapshot
from runtime.framework import MemoryReader
from runtime.render import run
from runtime.schema import CRD_DIR, SchemaChecker
from runtime.testing import Make

ROOT = Path(__file__).resolve().parents[3]
RUNTIME_FILE = ROOT / "config" / "runtimes" / "torch-distributed.yaml"

RUNTIME = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: test-runtime
  namespace: default
spec:
  mlPolicy:
    numNodes: 1
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: busybox
"""

BOMB = (
    "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainingRuntime\nmetadata: {name: test-runtime}\n"
    + 'x0: &x0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(f"x{i}: &x{i} [" + ",".join([f"*x{i - 1}"] * 9) + "]\n" for i in range(1, 9))
    + "spec: {template: {spec: {replicatedJobs: *x8}}}\n"
)

# name → (data.runtime, what the message says)
TAMPERED: dict[str, tuple[Any, str]] = {
    "an alias bomb": (BOMB, "document contains excessive aliasing"),
    "more aliases than the node cap": (  # 1% real nodes: within kubectl's ratio, beyond our node cap
        "a: &a [" + ",".join(["x"] * 1200) + "]\nb: [" + ",".join(["*a"] * 90) + "]\n",
        f"more than {MAX_SNAPSHOT_NODES} nodes",
    ),
    "1 MiB of binary garbage": (
        bytes(range(256)).decode("latin-1") * 4096,
        "unable to unmarshal the snapshot",
    ),
    "more than 1 MiB": ("a: " + "x" * (1 << 20), "more than 1048576 characters"),
    "a 1 MiB scalar": ("x" * ((1 << 20) - 10), "not a runtime object but string"),
    "a YAML list": ("- a\n- b\n", "not a runtime object but array"),
    "deep nesting": ("[" * 100_000 + "]" * 100_000, "unable to unmarshal the snapshot: line 1"),
    "a huge integer": ("9" * 100_000, "not a runtime object but string"),
    "a python tag": ("!!python/object/apply:os.system ['true']", "not a runtime object but array"),
    "a python tag on the runtime": (
        RUNTIME.replace("kind: TrainingRuntime", "kind: !!python/name:os.system TrainingRuntime").replace(
            "numNodes: 1", "numNodes: !!python/object:os.system 1"
        ),
        "spec.mlPolicy.numNodes: expected integer, found string",
    ),
    "not a string": (12, "the 'runtime' data is integer"),
    "a mapping instead of a string": ({"a": 1}, "the 'runtime' data is object"),
    "spec is not a mapping": (
        RUNTIME.split("spec:", maxsplit=1)[0] + "spec: [1, 2]\n",
        "spec: expected object, found array",
    ),
    "spec.template is garbage": (
        RUNTIME.split("  template:", maxsplit=1)[0] + "  template: 12\n",
        "spec.template: expected object, found integer",
    ),
    "a replicated job without a mapping template": (
        RUNTIME.replace(
            "        template:\n          spec:\n            template:", "        template: [x]\n        x:"
        ),
        "spec.template.spec.replicatedJobs[0].template: expected object, found array",
    ),
    "a container name that is a list": (
        RUNTIME.replace("- name: node\n                  image", "- name: [node]\n                  image"),
        "containers[0].name: expected string, found array",
    ),
    "metadata is a string": (
        RUNTIME.replace("metadata:\n  name: test-runtime\n  namespace: default\n", "metadata: x\n"),
        "metadata: expected object",
    ),
    "labels that are not strings": (
        RUNTIME.replace("  namespace: default\n", "  namespace: default\n  labels: {a: [1]}\n"),
        "metadata.labels: expected a map of strings",
    ),
    "another kind": (
        RUNTIME.replace("kind: TrainingRuntime", "kind: ConfigMap"),
        "refers to the wrong runtime",
    ),
    "the runtime of another TrainJob": (
        RUNTIME.replace("name: test-runtime", "name: other-runtime"),
        '"other-runtime", "trainer.kubeflow.org", "TrainingRuntime"',
    ),
    "a 512 KiB runtime name": (
        RUNTIME.replace("name: test-runtime", "name: " + "n" * (1 << 19)),
        f"({1 << 19} characters)",
    ),
    "a null name": (
        RUNTIME.replace("name: test-runtime", "name: null"),
        "metadata.name: expected string, found null",
    ),
    "a numeric namespace": (
        RUNTIME.replace("namespace: default", "namespace: 7"),
        "metadata.namespace: expected string, found integer",
    ),
    "an infinity": (RUNTIME.replace("numNodes: 1", "numNodes: .inf"), "+Inf is not a JSON number"),
    "a recursive anchor": ("a: &a [*a]\n", "value contains itself"),
    # A lone surrogate is no UTF-8 (the API server never sends one; a caller of the library may).
    "a lone surrogate": (RUNTIME + "x: \udcff\n", "not UTF-8: a lone surrogate at character"),
}


def _configmap(make: Make, data: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "test-job-runtime-snapshot",
            "namespace": "default",
            "ownerReferences": [make.owner()],
        },
        "data": {constants.RUNTIME_SNAPSHOT_KEY: data},
    }


def test_the_untampered_snapshot_reads(make: Make) -> None:
    runtime = read_snapshot(_configmap(make, RUNTIME), make.trainjob())
    assert runtime["spec"]["mlPolicy"] == {"numNodes": 1}


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_a_tampered_snapshot_is_a_short_clear_snapshot_error(make: Make, case: str) -> None:
    from runtime.core import RuntimeRegistry
    from runtime.framework import Framework, PluginContext
    from runtime.plugins import builtin_registry

    data, message = TAMPERED[case]
    configmap = _configmap(make, data)
    with pytest.raises(SnapshotError) as raised:
        read_snapshot(configmap, make.trainjob())
    assert str(raised.value).startswith("invalid runtime snapshot: ")
    assert message in str(raised.value)
    assert len(str(raised.value)) < 600
    registry = RuntimeRegistry(Framework(builtin_registry(), PluginContext()))
    with pytest.raises(SnapshotError, match=r"^unable to get runtime snapshot: invalid runtime snapshot: "):
        registry.new_objects(make.trainjob(), MemoryReader([configmap]))


def test_every_tampering_is_refused_within_1_gib_and_a_time_limit() -> None:
    # Each case in a fresh interpreter under RLIMIT_AS = 1 GiB: a MemoryError, a RecursionError or a hang
    # fails the test (the run prints each case's exception type; anything but SnapshotError fails).
    code = textwrap.dedent(
        """
        import json, resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        sys.path.insert(0, "test/unit/runtime")
        import test_runtime_snapshot_input as cases
        from runtime.core.snapshot import read_snapshot
        from runtime.testing import Make
        make = Make()
        outcome = {}
        for name, (data, _) in cases.TAMPERED.items():
            try:
                read_snapshot(cases._configmap(make, data), make.trainjob())
                outcome[name] = "accepted"
            except Exception as exc:
                outcome[name] = type(exc).__name__
        print(json.dumps(outcome))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout) == dict.fromkeys(TAMPERED, "SnapshotError")


def test_snapshots_of_the_default_runtimes_read_back_equal(make: Make) -> None:
    for path in sorted((ROOT / "config" / "runtimes").glob("*.yaml")):
        for runtime in kubeyaml.load_all(path.read_text()):
            if not isinstance(runtime, dict) or runtime.get("kind") != "ClusterTrainingRuntime":
                continue
            trainjob = make.trainjob()
            trainjob["spec"]["runtimeRef"] = {"name": runtime["metadata"]["name"]}
            configmap = build_snapshot(trainjob, runtime, "ClusterTrainingRuntime")
            assert read_snapshot(configmap, trainjob) == go_json_training_runtime(runtime), path


def test_strings_that_look_like_other_scalars_survive_a_snapshot(make: Make) -> None:
    runtime = kubeyaml.load(RUNTIME)
    values = ["y", "n", "on", "0o10", "1e1", "08", "1:30", "2001-12-14", "~", "", "<<", "true"]
    runtime["metadata"]["labels"] = {f"k{i}": v for i, v in enumerate(values)}
    configmap = build_snapshot(make.trainjob(), runtime, "TrainingRuntime")
    assert read_snapshot(configmap, make.trainjob())["metadata"]["labels"] == runtime["metadata"]["labels"]


def test_a_snapshot_written_by_upstreams_go_marshaller_reads(make: Make) -> None:
    # sigs.k8s.io/yaml.Marshal (go-yaml v2's encoder) output for a runtime with tricky strings: it quotes
    # what go-yaml would resolve otherwise, and writes integers plainly.
    text = textwrap.dedent(
        """\
        apiVersion: trainer.kubeflow.org/v1alpha1
        kind: TrainingRuntime
        metadata:
          labels:
            a: "y"
            b: "1e1"
            c: "0o10"
            d: "1:30"
          name: test-runtime
          namespace: default
        spec:
          mlPolicy:
            numNodes: 2
          template:
            spec:
              replicatedJobs:
              - name: node
                replicas: 1
        """
    )
    runtime = read_snapshot(_configmap(make, text), make.trainjob())
    assert runtime["metadata"]["labels"] == {"a": "y", "b": "1e1", "c": "0o10", "d": "1:30"}
    assert runtime["spec"]["mlPolicy"]["numNodes"] == 2


def test_one_text_is_parsed_once_and_shared_unchanged_by_a_build(make: Make) -> None:
    from runtime.core import RuntimeRegistry
    from runtime.framework import Framework, PluginContext
    from runtime.plugins import builtin_registry

    text = RUNTIME.replace("numNodes: 1", "numNodes: 3")  # a text no other test memoises
    first = read_snapshot(_configmap(make, text), make.trainjob())
    before = json.loads(json.dumps(first))
    registry = RuntimeRegistry(Framework(builtin_registry(), PluginContext()))
    registry.new_objects(make.trainjob(), MemoryReader([_configmap(make, text)]))
    again = read_snapshot(_configmap(make, text), make.trainjob())
    assert again is first  # parsed once: every TrainJob started on one runtime version shares it
    assert again == before  # and the pipeline did not change it


@pytest.mark.parametrize("value", [1, 1.0, True, "1", None, float("nan"), float("inf"), 2**70], ids=repr)
def test_a_snapshot_is_written_as_the_runtime_holds_it_memoised_or_not(make: Make, value: Any) -> None:
    runtime = kubeyaml.load(RUNTIME)
    # render may be given any YAML value, not only JSON ones; Go's typed step leaves a misfit as written
    runtime["metadata"]["labels"] = {"extra": value}
    typed = {**runtime, "apiVersion": constants.API_VERSION, "kind": "TrainingRuntime"}
    expected = kubeyaml.dump(go_json_training_runtime(typed))
    for _ in range(2):  # written, then memoised where it can be
        configmap = build_snapshot(make.trainjob(), runtime, "TrainingRuntime")
        assert configmap["data"][constants.RUNTIME_SNAPSHOT_KEY] == expected


def test_a_snapshot_beyond_the_memos_bounds_still_reads(make: Make) -> None:
    many = "".join(f"\n    k{i}: v" for i in range(SHARED_MAX_NODES))  # more nodes than the memo keeps
    text = RUNTIME.replace("  namespace: default\n", "  namespace: default\n  labels:" + many + "\n")
    runtime = read_snapshot(_configmap(make, text), make.trainjob())
    assert len(runtime["metadata"]["labels"]) == SHARED_MAX_NODES
    assert read_snapshot(_configmap(make, text), make.trainjob()) is not runtime  # not kept


# ---------------------------------------------------------------------------------------------------------
# Property: alias-heavy YAML, randomly nested, is read or refused, never more


@functools.cache
def _schemas() -> SchemaChecker:
    return SchemaChecker.from_crd_dir(CRD_DIR)


@st.composite
def _aliased_yaml(draw: st.DrawFn) -> str:
    """A runtime holding up to 8 anchors, each a list or map of scalars and aliases to earlier anchors
    (now and then to a later one), nested up to 3 levels, and an unknown field that aliases the last."""
    count = draw(st.integers(1, 8))
    lines = [
        "apiVersion: trainer.kubeflow.org/v1alpha1",
        "kind: TrainingRuntime",
        "metadata: {name: test-runtime}",
    ]

    def node(index: int, depth: int) -> str:
        choice = draw(st.integers(0, 5 if depth < 3 else 2))
        if choice == 0 or (choice <= 2 and index == 0):
            return draw(st.sampled_from(["x", "1", "1e1", "y", "~", "'q'"]))
        if choice <= 2:
            forward = draw(st.integers(0, 19)) == 0  # now and then an alias of an anchor not yet defined
            return f"*a{index + 1 if forward else draw(st.integers(0, index - 1))}"
        items = [node(index, depth + 1) for _ in range(draw(st.integers(0, 6)))]
        if choice <= 4:
            return "[" + ", ".join(items) + "]"
        return "{" + ", ".join(f"k{i}: {item}" for i, item in enumerate(items)) + "}"

    for index in range(count):
        items = [node(index, 1) for _ in range(draw(st.integers(1, 8)))]
        lines.append(f"a{index}: &a{index} [" + ", ".join(items) + "]")
    # Unknown fields are read and ignored, as by upstream's typed unmarshal: the expansion is all there is.
    lines.append(f"spec: {{mlPolicy: {{numNodes: 1}}}}\nexpanded: *a{count - 1}")
    return "\n".join(lines) + "\n"


@settings(max_examples=50, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_aliased_yaml())
def alias_heavy_yaml_is_read_or_refused_within_bounds(text: str) -> None:
    """The property (run by the test below, in an interpreter limited to 1 GiB)."""
    make = Make()
    try:
        runtime = read_snapshot(_configmap(make, text), make.trainjob())
    except SnapshotError as exc:
        assert len(str(exc)) < 600
    else:
        assert len(json.dumps(runtime)) < 64 * MAX_SNAPSHOT_NODES  # what was read is what was bounded
    # The same anchors in a TrainJob given to trainer-render on stdin: rendered or refused (exit 0 or 2).
    trainjob = text.replace("kind: TrainingRuntime", "kind: TrainJob").replace(
        "spec: {mlPolicy: {numNodes: 1}}", "spec: {runtimeRef: {name: torch-distributed}}"
    )
    out, err = io.StringIO(), io.StringIO()
    stdin = io.BytesIO(trainjob.encode())
    code = run(["-", "-r", str(RUNTIME_FILE)], stdin=stdin, stdout=out, stderr=err, schemas=_schemas())
    assert code in (0, 2), err.getvalue()
    assert len(err.getvalue()) < 4000


def test_alias_heavy_yaml_is_read_or_refused_within_bounds_under_a_memory_cap() -> None:
    # Seeded (derandomize) and a bounded example count; more than 1 GiB of address space is an error.
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "sys.path.insert(0, 'test/unit/runtime')\n"
        "import test_runtime_snapshot_input as t\n"
        "t.alias_heavy_yaml_is_read_or_refused_within_bounds()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
