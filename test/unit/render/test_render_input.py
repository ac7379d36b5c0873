"""trainer-render's input: YAML read as kubectl reads it, hostile YAML refused in bounded time and memory,
and the command used in a shell pipeline (`-`, FIFOs, process substitution).

The scalar table is what kubectl's YAML path gives, by experiment: go-yaml v2.4.3's resolver through
sigs.k8s.io/yaml v1.6.0 `YAMLToJSON` (Go 1.26), then the API server's JSON decoding (an integer that does
not fit int64 is a float there).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from runtime import kubeyaml
from runtime.echo import ECHO_LIMIT, elide
from runtime.render import DEFAULT_CRD_DIR, RenderError, SchemaChecker, load_documents, run

ROOT = Path(__file__).resolve().parents[3]
RUNTIMES = ROOT / "config" / "runtimes"
SCHEMAS = SchemaChecker.from_crd_dir(DEFAULT_CRD_DIR)

TRAINJOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: demo
spec:
  runtimeRef:
    name: torch-distributed
"""

# A 9-level "billion laughs": under 600 bytes that expand to 9**9 strings (a 387 MiB JSON text).
BOMB = (
    TRAINJOB
    + 'x0: &x0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(f"x{i}: &x{i} [" + ",".join([f"*x{i - 1}"] * 9) + "]\n" for i in range(1, 9))
    + "x9: *x8\n"
)


def _run(*argv: str | Path, stdin: Any = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], stdin=stdin, stdout=out, stderr=err, schemas=SCHEMAS)
    return code, out.getvalue(), err.getvalue()


def _bounded(
    code: str, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`code` run by a fresh interpreter that may use at most 1 GiB of address space, for `timeout` s."""
    prelude = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )


# ---------------------------------------------------------------------------------------------------------
# Scalars, keys, tags and merges as kubectl reads them

_INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e1", 10),  # a float that is a whole number is the integer after Go's JSON round trip
        ("1E1", 10),
        ("1.0", 1),
        ("1.", 1),
        ("-0.0", 0),
        ("1.5", 1.5),
        (".5", 0.5),
        ("+.5", 0.5),
        (".5e1", 5),
        ("1e-7", 1e-7),
        ("1e20", 1e20),  # whole, but not an int64: a float at the API server
        ("1e21", 1e21),
        ("1e400", "1e400"),  # out of float64 range: go-yaml keeps the string
        ("1e-400", 0),
        ("0x10", 16),
        ("-0x10", -16),
        ("010", 8),  # Go's base-0 integers: a leading 0 is octal
        ("08", 8),  # ... not octal, so a float, and a whole one
        ("0o10", 8),
        ("0b101", 5),
        ("1_000", 1000),
        ("1__0", 10),
        ("1_", 1),
        ("_1", "_1"),
        ("+10", 10),
        ("0x1p4", "0x1p4"),
        (str(_INT64_MAX), _INT64_MAX),
        (str(_INT64_MAX + 1), float(_INT64_MAX + 1)),
        ("9" * 5000, "9" * 5000),  # no int() of 5000 digits: a float would be infinite, so a string
        ("1:30", "1:30"),  # no sexagesimal numbers (PyYAML's YAML 1.1 reads 90)
        ("190:20:30", "190:20:30"),
        ("yes", True),
        ("no", False),
        ("on", True),
        ("off", False),
        ("y", True),
        ("n", False),
        ("Y", True),
        ("True", True),
        ("TRUE", True),
        ("tRuE", "tRuE"),
        ("~", None),
        ("null", None),
        ("", None),
        ('"~"', "~"),
        ("'1e1'", "1e1"),
        ("2001-12-14", "2001-12-14"),  # go-yaml keeps timestamps as strings in an interface{}
        ("2001-12-14T21:59:43Z", "2001-12-14T21:59:43Z"),
        ("Infinity", "Infinity"),
        ("NaN", "NaN"),
        ("1,000", "1,000"),
        ("!!float 1", 1),
        ("!!str 1", "1"),
        ('!!int "3"', 3),
        ("!!bool yes", True),
        ("!!binary aGVsbG8=", "hello"),
        ("!!binary '/w=='", "\ufffd"),
        ("!!timestamp 2001-12-14", "2001-12-14"),
        ("! 3", "3"),
        ("!!python/object:os.system x", "x"),  # unknown tags are ignored, never constructed
        ("!foo bar", "bar"),
        ("!!python/object {a: 1}", {"a": 1}),
        ("!!set {a}", {"a": None}),
        ("!!omap [a: 1]", [{"a": 1}]),
        ("{a: 1, <<: {a: 2, b: 3}}", {"a": 2, "b": 3}),  # go-yaml v2: merged keys land where << is
        ("{<<: {a: 2, b: 3}, a: 1}", {"a": 1, "b": 3}),
        ("{<<: [{a: 1}, {a: 2, b: 2}]}", {"a": 1, "b": 2}),  # earlier maps of the list win
        ("{'<<': {a: 1}}", {"<<": {"a": 1}}),  # a quoted << is an ordinary key
        ("{1: a, 2.5: b, true: c}", {"1": "a", "2.5": "b", "true": "c"}),
        ("{1e5: a, 1e6: b, 123456789.0: c}", {"100000": "a", "1e+06": "b", "1.2345679e+08": "c"}),
        ("{0.0001: a, 0.00001: b, -0.0: c}", {"0.0001": "a", "1e-05": "b", "-0": "c"}),
        ("[&a 1, *a]", [1, 1]),
        ("{a: 1, a: 2}", {"a": 2}),
    ],
)
def test_scalars_keys_tags_and_merges_read_as_kubectl_reads_them(text: str, value: Any) -> None:
    loaded = kubeyaml.load(f"v: {text}")["v"]
    assert (type(loaded), loaded) == (type(value), value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (".inf", "line 1, column 4: +Inf is not a JSON number (kubectl: json: unsupported value: +Inf)"),
        ("-.inf", "-Inf is not a JSON number"),
        (".nan", "NaN is not a JSON number"),
        ("!!int 1.0", "line 1, column 4: cannot decode !!float `1.0` as a !!int"),
        ("!!null foo", "cannot decode !!str `foo` as a !!null"),
        ("!!timestamp foo", "cannot decode !!str `foo` as a !!timestamp"),
        ("{~: a}", "line 1, column 5: a map key may not be null"),
        ("{[1]: a}", "a map key must be a scalar, not a collection"),
        ("{<<: 1}", "map merge requires map or sequence of maps as the value"),
        ("{<<: [1]}", "map merge requires map or sequence of maps as the value"),
        ("&a [*a]", "line 1, column 8: anchor 'a' value contains itself"),
        ("*nowhere", "unknown anchor 'nowhere' referenced"),
        ("[1, 2", "line 2, column 1: did not find expected ',' or ']'"),  # libyaml's own messages
        ("!!binary '***'", "!!binary value is not base64: ***"),
    ],
)
def test_what_kubectl_refuses_is_an_error_with_a_line_and_column(text: str, problem: str) -> None:
    with pytest.raises(kubeyaml.YAMLInputError) as raised:
        kubeyaml.load(f"v: {text}")
    assert problem in str(raised.value)


def test_every_alias_use_is_a_fresh_copy() -> None:
    loaded = kubeyaml.load("a: &a {x: [1]}\nb: *a\nc: {<<: *a}\n")
    loaded["b"]["x"].append(2)
    assert loaded["a"] == {"x": [1]} and loaded["c"] == {"x": [1]}


def test_documents_of_a_stream_and_empty_documents() -> None:
    assert kubeyaml.load_all("a: 1\n---\n---\n- 2\n") == [{"a": 1}, None, [2]]
    assert kubeyaml.load("a: 1\n---\n[unclosed\n") == {"a": 1}  # as go-yaml's Unmarshal: one document


@pytest.mark.parametrize(
    "value",
    ["y", "n", "N", "yes", "on", "0o10", "1e1", "08", "1_000", "<<", "1:30", "2001-12-14", "~", "", ".inf"],
)
def test_dump_quotes_every_string_go_yaml_would_read_as_something_else(value: str) -> None:
    text = kubeyaml.dump({"v": value, "n": 1, "f": 1.5, "b": True, "z": None})
    assert kubeyaml.load(text) == {"v": value, "n": 1, "f": 1.5, "b": True, "z": None}
    assert kubeyaml.load(kubeyaml.dump({value: 1})) == {value: 1}  # as a key, too (`<<` is quoted there)


# ---------------------------------------------------------------------------------------------------------
# Hostile YAML: bounded time and memory, a clear error, a capped echo


def test_the_alias_ratio_limit_is_go_yamls() -> None:
    assert kubeyaml.allowed_alias_ratio(1000) == 0.99
    assert kubeyaml.allowed_alias_ratio(400_000) == 0.99
    assert kubeyaml.allowed_alias_ratio(2_200_000) == pytest.approx(0.545)
    assert kubeyaml.allowed_alias_ratio(4_000_000) == 0.10
    # Moderate aliasing (each anchor used 50 times) is fine; the limit is for expansion, not for aliases.
    text = "a: &a [1, 2, 3]\nb: [" + ", ".join(["*a"] * 50) + "]\n"
    assert len(kubeyaml.load(text)["b"]) == 50


def test_an_alias_bomb_is_refused_by_trainer_render_in_bounded_time_and_memory(tmp_path: Path) -> None:
    # Before: 3 GB and 111 s to a MemoryError (an internal error echoing 63 MB); under 1 GiB it dies in
    # about a minute. kubectl refuses the file at once ("document contains excessive aliasing").
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    assert len(BOMB) < 600
    result = _bounded(
        "import sys\nfrom runtime.render import main\nsys.exit(main(sys.argv[1:]))\n",
        str(bomb),
        "--no-schema",
        "-r",
        str(RUNTIMES),
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"trainer-render: {bomb}: invalid YAML: line ")
    assert "document contains excessive aliasing" in result.stderr
    assert len(result.stderr) < 400 and result.stdout == ""


def test_deep_nesting_is_refused_without_a_recursion_error() -> None:
    for depth in (kubeyaml.MAX_DEPTH + 1, 100_000):
        with pytest.raises(kubeyaml.YAMLInputError, match=r"nest|depth"):
            kubeyaml.load("[" * depth + "]" * depth)
    assert kubeyaml.load("[" * kubeyaml.MAX_DEPTH + "]" * kubeyaml.MAX_DEPTH) is not None
    # Aliases cannot stack depth beyond the limit either.
    chain = (
        "a0: &a0 "
        + "[" * 100
        + "]" * 100
        + "\n"
        + "a1: &a1 [[[[*a0]]]]\n" * 1
        + "b: "
        + "[" * 30
        + "*a1"
        + "]" * 30
    )
    with pytest.raises(kubeyaml.YAMLInputError, match="through aliases"):
        kubeyaml.load(chain)


def test_max_nodes_caps_a_stream_outright() -> None:
    with pytest.raises(kubeyaml.YAMLInputError, match="more than 10 nodes"):
        kubeyaml.load("[" + ", ".join("x" * 11) + "]", max_nodes=10)


def test_elide_keeps_the_start_and_says_how_long_the_value_was() -> None:
    assert elide("x" * ECHO_LIMIT) == "x" * ECHO_LIMIT
    assert elide("x" * 1000) == "x" * ECHO_LIMIT + "… (1000 characters)"


def test_no_error_echoes_more_than_the_capped_length_of_a_value(tmp_path: Path) -> None:
    huge = "A" * (1 << 20)
    cases = {
        "tagged.yaml": f"v: !!int {huge}\n",
        "kind.yaml": f"apiVersion: v1\nkind: {huge}\nmetadata: {{name: x}}\n",
        "enum.yaml": TRAINJOB.replace(
            "name: torch-distributed", f"name: torch-distributed\n    kind: {huge}"
        ),
        "trainjob.yaml": TRAINJOB.replace("name: torch-distributed", f"name: {huge}"),
    }
    for name, text in cases.items():
        code, out, err = _run(_write(tmp_path, name, text), "-r", RUNTIMES)
        assert code == 2 and out == ""
        assert len(err) < 2000, (name, len(err))
        assert f"({1 << 20} characters)" in err or huge[:300] not in err


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------------------------
# The command in a shell pipeline


def test_a_fifo_is_read_not_reported_missing(tmp_path: Path) -> None:
    fifo = tmp_path / "trainjob.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("w") as stream:  # blocks until trainer-render opens the FIFO for reading
            stream.write(TRAINJOB)

    writer = threading.Thread(target=write, name="test/fifo-writer", daemon=True)
    writer.start()
    try:
        code, out, err = _run(fifo, "-r", RUNTIMES)
    finally:
        if writer.is_alive():  # trainer-render never opened it: unblock the writer
            with fifo.open("r") as stream:
                stream.read()
        writer.join(timeout=10)
    assert (code, err) == (0, "")
    assert "name: demo-runtime-snapshot" in out


def test_dash_reads_stdin_in_process_and_as_a_command() -> None:
    code, out, err = _run("-", "-r", RUNTIMES, stdin=io.BytesIO(TRAINJOB.encode()))
    assert (code, err) == (0, "") and "kind: JobSet" in out
    result = _bounded(
        "import sys\nfrom runtime.render import main\nsys.exit(main(sys.argv[1:]))\n",
        "-",
        "-r",
        str(RUNTIMES),
        "--no-schema",
        stdin=TRAINJOB,
    )
    assert result.returncode == 0, result.stderr
    assert "kind: JobSet" in result.stdout


def test_dash_may_be_given_only_once() -> None:
    code, _, err = _run("-", "-r", "-", stdin=io.BytesIO(TRAINJOB.encode()))
    assert code == 2
    assert err == "trainer-render: standard input (-) can be read only once: give it as one path only\n"


def test_dev_stdin_is_a_file_like_any_other() -> None:
    result = _bounded(
        "import sys\nfrom runtime.render import main\nsys.exit(main(sys.argv[1:]))\n",
        "/dev/stdin",
        "-r",
        str(RUNTIMES),
        "--no-schema",
        stdin=TRAINJOB,
    )
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------------------------------------------------
# Feature gates, kinds, directories


@pytest.mark.parametrize(
    ("args", "config", "error"),
    [
        (
            ("--feature-gates", "Foo=true"),
            None,
            "trainer-render: --feature-gates: unrecognized feature gate: 'Foo' (known: TrainJobStatus)\n",
        ),
        (
            ("--feature-gates", "TrainJobStatus=true,trainjobstatus=false"),
            None,
            "unrecognized feature gate: 'trainjobstatus'",
        ),
        ((), "featureGates: {Foo: false}\n", "featureGates: unrecognized feature gate: 'Foo'"),
    ],
)
def test_an_unknown_feature_gate_is_an_error_as_in_the_manager(
    tmp_path: Path, args: tuple[str, ...], config: str | None, error: str
) -> None:
    extra: tuple[str | Path, ...] = args
    if config is not None:
        extra = (*args, "--config", _write(tmp_path, "config.yaml", config))
    code, _, err = _run(_write(tmp_path, "trainjob.yaml", TRAINJOB), "-r", RUNTIMES, *extra)
    assert code == 2
    assert error in err


def test_a_file_without_a_trainjob_says_what_it_holds(tmp_path: Path) -> None:
    runtime = RUNTIMES / "torch-distributed.yaml"
    code, _, err = _run(runtime, "-r", RUNTIMES)
    assert code == 2
    assert err == (
        f"trainer-render: {runtime}: kind: no document is a TrainJob (expected exactly one)\n"
        f'  found ClusterTrainingRuntime "torch-distributed" ({runtime})\n'
    )


def test_a_runtime_path_without_runtimes_says_what_it_found(tmp_path: Path) -> None:
    other = _write(tmp_path, "other.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    code, _, err = _run(_write(tmp_path, "trainjob.yaml", TRAINJOB), "-r", other)
    assert code == 2
    assert err == (
        f"trainer-render: --runtime {other}: no TrainingRuntime or ClusterTrainingRuntime "
        "(trainer.kubeflow.org/v1alpha1) found\n"
        f'  found ConfigMap "x" ({other})\n'
    )


def test_an_empty_directory_is_an_error_that_says_what_it_holds(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.md").write_text("no runtimes here\n")
    code, _, err = _run(_write(tmp_path, "trainjob.yaml", TRAINJOB), "-r", empty)
    assert code == 2
    assert (
        err
        == f"trainer-render: {empty}: no *.yaml, *.yml or *.json file in the directory (found 1 other file)\n"
    )


def test_unreadable_directories_are_skipped_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tests run as root, which reads any directory: the walk reports the failure as os.walk does.
    real_walk = os.walk

    def walk(top: Any, onerror: Any = None, **kwargs: Any) -> Any:
        onerror(PermissionError(13, "Permission denied", str(Path(top, "locked"))))
        yield from real_walk(top, onerror=onerror, **kwargs)

    monkeypatch.setattr("runtime.render.os.walk", walk)
    code, out, err = _run(_write(tmp_path, "trainjob.yaml", TRAINJOB), "-r", RUNTIMES)
    assert code == 0 and "kind: JobSet" in out
    assert err == f"Warning: {RUNTIMES / 'locked'}: skipped, cannot read the directory: Permission denied\n"


def test_a_missing_path_is_still_reported_missing(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match=r"nope.yaml: no such file or directory$"):
        load_documents(tmp_path / "nope.yaml")


def test_json_input_reads_like_yaml(tmp_path: Path) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"n": "1e1"}}
    (document,) = load_documents(_write(tmp_path, "x.json", json.dumps(obj)))
    assert document.obj == obj


def test_a_document_of_another_version_beside_runtimes_is_reported_as_skipped(tmp_path: Path) -> None:
    runtimes = tmp_path / "runtimes"
    runtimes.mkdir()
    shipped = (ROOT / "config" / "runtimes" / "torch-distributed.yaml").read_text()
    (runtimes / "old.yaml").write_text(
        shipped.replace("trainer.kubeflow.org/v1alpha1", "trainer.kubeflow.org/v1")
    )
    (runtimes / "jax.yaml").write_text((ROOT / "config" / "runtimes" / "jax-distributed.yaml").read_text())
    code, _, err = _run(_write(tmp_path, "trainjob.yaml", TRAINJOB), "-r", runtimes)
    assert code == 2  # torch-distributed is not found, and the warning says why
    assert f'{runtimes / "old.yaml"}: skipped ClusterTrainingRuntime "torch-distributed"' in err
    assert "not a trainer.kubeflow.org/v1alpha1 runtime" in err


def test_an_input_that_decodes_to_too_many_nodes_is_refused_quickly(tmp_path: Path) -> None:
    many = _write(tmp_path, "many.yaml", "items: [" + ",".join(["1"] * 300_000) + "]\n")
    code, _, err = _run(_write(tmp_path, "trainjob.yaml", TRAINJOB), "-r", many)
    assert code == 2
    assert "more than 250000 nodes" in err
