"""Prometheus text, as kube-apiserver and the managers expose it: samples, request accounting, quantiles."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from benchmark.scale import IGNORED_RESOURCES, READ_VERBS, WRITE_VERBS


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample of the Prometheus text format, its labels sorted."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str:
        for name, value in self.labels:
            if name == key:
                return value
        return ""


def parse_prometheus(text: str, prefixes: Sequence[str] = ()) -> list[Sample]:
    """The samples of a Prometheus text exposition (``prometheus_client``'s parser); with ``prefixes``, only
    the families whose names start with one of them: their lines are picked out before parsing, which keeps
    kube-apiserver's multi-megabyte page cheap. A line that is not a sample is a ValueError quoting it."""
    wanted = tuple(prefixes)
    if wanted:
        text = "".join(f"{line}\n" for line in text.splitlines() if line.startswith(wanted))
    try:
        return [
            Sample(sample.name, tuple(sorted(sample.labels.items())), float(sample.value))
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        ]
    except ValueError as exc:
        raise ValueError(f"not a Prometheus sample line: {_bad_line(text)[:200]!r}") from exc


def _bad_line(text: str) -> str:
    """The first line of ``text`` that does not parse on its own (what an error names)."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        try:
            list(text_string_to_metric_families(f"{line}\n"))
        except ValueError:
            return line
    return text


def metric_sum(samples: Iterable[Sample], family: str, **match: str) -> float:
    """The sum of family ``family``'s samples whose labels include ``match``."""
    return sum(
        s.value for s in samples if s.name == family and all(s.label(k) == v for k, v in match.items())
    )


def metric_delta(before: Iterable[Sample], after: Iterable[Sample], family: str, **match: str) -> float:
    """How much ``metric_sum`` of ``family`` and ``match`` grew from the scrape ``before`` to ``after``."""
    return metric_sum(after, family, **match) - metric_sum(before, family, **match)


RequestKey = tuple[str, str, str]
"""(verb, resource[/subresource], HTTP code) as kube-apiserver's ``apiserver_request_total`` labels them."""


def apiserver_requests(samples: Iterable[Sample]) -> Counter[RequestKey]:
    """``apiserver_request_total`` by (verb, resource[/subresource], code), summed over the other labels."""
    counts: Counter[RequestKey] = Counter()
    for s in samples:
        if s.name != "apiserver_request_total":
            continue
        resource = s.label("resource")
        if s.label("subresource"):
            resource = f"{resource}/{s.label('subresource')}"
        counts[(s.label("verb"), resource, s.label("code"))] += int(s.value)
    return counts


def subtract(after: Mapping[RequestKey, int], before: Mapping[RequestKey, int]) -> Counter[RequestKey]:
    """``after - before`` per key, keeping positive differences only."""
    delta: Counter[RequestKey] = Counter()
    for key, value in after.items():
        if value - before.get(key, 0) > 0:
            delta[key] = value - before.get(key, 0)
    return delta


def managers_requests(
    delta: Mapping[RequestKey, int], own: Mapping[tuple[str, str], int]
) -> Counter[RequestKey]:
    """The API server's ``delta`` less the benchmark's ``own`` (verb, resource) requests (all answered 2xx,
    taken from the 2xx codes in order), without WATCH and without :data:`IGNORED_RESOURCES`."""
    remaining = Counter(own)
    result: Counter[RequestKey] = Counter()
    for (verb, resource, code), value in sorted(delta.items()):
        if verb == "WATCH" or resource in IGNORED_RESOURCES or resource.startswith("/"):
            continue
        left = value
        if code.startswith("2") and remaining[(verb, resource)] > 0:
            taken = min(left, remaining[(verb, resource)])
            remaining[(verb, resource)] -= taken
            left -= taken
        if left > 0:
            result[(verb, resource, code)] = left
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSummary:
    """A manager's requests over a scenario: writes are 2xx answers to writing verbs."""

    writes: int
    reads: int
    failed: int
    """Requests answered with something other than 2xx (conflicts, NotFound...)."""
    by_verb_resource: dict[str, int]
    """``"VERB resource"`` (codes summed) -> count."""

    def per(self, n: int) -> dict[str, float]:
        return {key: value / n for key, value in sorted(self.by_verb_resource.items())} if n else {}


def summarize_requests(requests: Mapping[RequestKey, int]) -> RequestSummary:
    writes = reads = failed = 0
    by: Counter[str] = Counter()
    for (verb, resource, code), value in requests.items():
        ok = code.startswith("2")
        if verb in WRITE_VERBS and ok:
            writes += value
        if verb in READ_VERBS:
            reads += value
        if not ok:
            failed += value
        by[f"{verb} {resource}"] += value
    return RequestSummary(
        writes=writes, reads=reads, failed=failed, by_verb_resource=dict(sorted(by.items()))
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) by linear interpolation between order statistics (numpy's default);
    NaN for no values."""
    if not 0 <= q <= 1:
        raise ValueError(f"q must be within [0, 1], got {q}")
    if not values:
        return math.nan
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """Prometheus' ``histogram_quantile``: ``buckets`` are (upper bound, cumulative count), +Inf last;
    linear interpolation inside the bucket; the highest finite bound if the quantile is in +Inf."""
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] <= 0:
        return math.nan
    rank = q * ordered[-1][1]
    previous_bound, previous_count = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if math.isinf(bound):
                return previous_bound
            if count == previous_count:
                return bound
            return previous_bound + (bound - previous_bound) * (rank - previous_count) / (
                count - previous_count
            )
        previous_bound, previous_count = bound, count
    return previous_bound


def histogram_buckets(samples: Iterable[Sample], name: str) -> list[tuple[float, float]]:
    """The (le, cumulative count) pairs of histogram ``name`` summed over its other labels."""
    sums: Counter[float] = Counter()
    for s in samples:
        if s.name == f"{name}_bucket":
            sums[float(s.label("le"))] += s.value
    return sorted(sums.items())


def subtract_buckets(
    after: Sequence[tuple[float, float]], before: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    earlier = dict(before)
    return [(bound, count - earlier.get(bound, 0.0)) for bound, count in after]
