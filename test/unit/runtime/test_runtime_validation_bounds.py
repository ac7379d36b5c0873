"""How many field errors a report lists, and how long each line is (runtime.framework.validation:
`error_lines`, `FieldError.__str__`): bounded whatever the input, the first lines printed as Go does."""

from __future__ import annotations

from runtime.framework import ErrorType, FieldError, error_lines
from runtime.framework.validation import DETAIL_LIMIT, MAX_LINES, PATH_LIMIT, PER_KIND

MISSING_JOB = "must not have replicated job that doesn't exist in the runtime job template"


def missing_job(patch: int, job: int) -> FieldError:
    path = f"spec.runtimePatches[{patch}].trainingRuntimeSpec.template.spec.replicatedJobs[{job}].name"
    return FieldError.invalid(path, "x", MISSING_JOB)


def test_a_few_errors_are_listed_whole_as_go_prints_them() -> None:
    errors = [missing_job(0, 0), FieldError.required("spec.runtimeRef.name", "")]
    assert error_lines(errors) == [str(e) for e in errors]
    assert error_lines(errors)[1] == "spec.runtimeRef.name: Required value"


def test_identical_lines_are_listed_once_as_gos_aggregate_does() -> None:
    assert error_lines([missing_job(0, 0), "a", missing_job(0, 0), "a"]) == [str(missing_job(0, 0)), "a"]


def test_sixteen_hundred_errors_of_one_kind_are_five_lines_then_how_many_more() -> None:
    # The hostile review's TrainJob: 16 patches naming 100 unknown replicated jobs each.
    errors = [missing_job(patch, job) for patch in range(16) for job in range(100)]
    lines = error_lines(errors)
    assert lines == [
        *(str(e) for e in errors[:PER_KIND]),
        f"and {1600 - PER_KIND} more Invalid value errors: {MISSING_JOB}",
    ]
    assert lines[0] == (
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name: "
        f'Invalid value: "x": {MISSING_JOB}'
    )


def test_ten_thousand_conditions_missing_four_fields_are_a_handful_of_lines() -> None:
    fields = ("lastTransitionTime", "message", "reason", "status")
    errors = [FieldError.required(f"status.conditions[{i}].{f}", "") for i in range(10_000) for f in fields]
    errors.append(
        FieldError(
            path="status.conditions",
            type=ErrorType.TOO_MANY,
            value=10_000,
            message="must have at most 8 items",
        )
    )
    lines = error_lines(errors)
    assert lines[PER_KIND] == "and 39995 more Required value errors"
    assert lines[-1] == "status.conditions: Too many: 10000: must have at most 8 items"
    assert len(lines) == PER_KIND + 2


def test_many_kinds_stop_after_max_lines_with_a_count_of_the_rest() -> None:
    errors = [FieldError.forbidden(f"spec.field{i}", f"detail {i}") for i in range(1000)]
    lines = error_lines(errors)
    assert len(lines) == MAX_LINES + 1
    assert lines[:MAX_LINES] == [str(e) for e in errors[:MAX_LINES]]
    assert lines[-1] == f"and {1000 - MAX_LINES} more"


def test_the_last_count_includes_the_errors_a_kept_summary_stands_for() -> None:
    # 6 of one kind (5 lines and a summary of 1), then 30 distinct ones: 20 lines in all, then the rest.
    errors = [missing_job(0, j) for j in range(6)] + [
        FieldError.forbidden(f"f{i}", f"d{i}") for i in range(30)
    ]
    lines = error_lines(errors)
    assert lines[PER_KIND] == f"and 1 more Invalid value errors: {MISSING_JOB}"
    assert len(lines) == MAX_LINES + 1
    shown = MAX_LINES - PER_KIND - 1
    assert lines[-1] == f"and {30 - shown} more"


def test_a_line_is_bounded_whatever_the_path_value_and_detail() -> None:
    key, name = "k" * 1_000_000, "n" * 1_000_000
    error = FieldError.invalid(f"metadata.labels[{key}]", name, f"must not have container {name}")
    line = str(error)
    assert line.startswith("metadata.labels[kkk")
    assert len(line) < PATH_LIMIT + DETAIL_LIMIT + 300
    assert "(1000017 characters)" in line  # the path's length, so the reader knows what was cut
