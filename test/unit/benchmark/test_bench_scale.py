"""The pure parts of ``make bench-scale`` (``test/benchmark/scale``).

What the benchmark reports is only as good as the arithmetic under it: the Prometheus text parser, the
request accounting that takes the benchmark's own requests out of kube-apiserver's counters, the quantiles,
the ``/proc`` readers, the log-line parser that dates "caches synced", and the target verdicts (upstream's
configuration and log lines: ``test/unit/support/test_upstream.py``). The processes themselves are
exercised by running the benchmark (``make bench-scale BENCH_ARGS=--quick``), not here.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmark.scale import managers, metrics, proc, report

ROOT = Path(__file__).resolve().parents[3]


# --- Prometheus text ----------------------------------------------------------------------------------


APISERVER_PAGE = """\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="jobset.x-k8s.io",resource="jobsets",scope="resource",subresource="",verb="APPLY",version="v1alpha2"} 7
apiserver_request_total{code="201",component="apiserver",dry_run="",group="trainer.kubeflow.org",resource="trainjobs",scope="resource",subresource="",verb="POST",version="v1alpha1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="trainer.kubeflow.org",resource="trainjobs",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 3
apiserver_request_total{code="404",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="GET",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 9
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/openapi/v3",verb="GET",version=""} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="jobset.x-k8s.io",resource="jobsets",scope="namespace",subresource="",verb="WATCH",version="v1alpha2"} 1
apiserver_request_duration_seconds_bucket{le="0.005",verb="GET"} 1
"""  # noqa: E501 - kube-apiserver's own lines


def test_a_sample_line_gives_its_name_sorted_labels_and_value() -> None:
    [sample] = metrics.parse_prometheus('x_total{b="2",a="1"} 3.5\n')
    assert sample == metrics.Sample("x_total", (("a", "1"), ("b", "2")), 3.5)
    assert sample.label("b") == "2"
    assert sample.label("missing") == ""


def test_label_values_may_hold_escaped_quotes_commas_and_braces() -> None:
    [sample] = metrics.parse_prometheus('m{path="/a,b{c}",msg="say \\"hi\\"\\n"} 1 1700000000000\n')
    assert sample.label("path") == "/a,b{c}"
    assert sample.label("msg") == 'say "hi"\n'
    assert sample.value == 1.0


def test_comments_blank_lines_and_unlabelled_samples_are_handled() -> None:
    samples = metrics.parse_prometheus('# HELP up x\n\nup 1\nbucket{le="+Inf"} 4\n')
    assert [(s.name, s.value) for s in samples] == [("up", 1.0), ("bucket", 4.0)]


def test_prefixes_keep_only_the_families_asked_for() -> None:
    samples = metrics.parse_prometheus(APISERVER_PAGE, ("apiserver_request_total",))
    assert {s.name for s in samples} == {"apiserver_request_total"}


def test_a_line_that_is_not_a_sample_is_an_error_quoting_it() -> None:
    with pytest.raises(ValueError, match="not a Prometheus sample line: 'garbage'"):
        metrics.parse_prometheus("garbage\n")


def test_metric_sum_adds_the_samples_whose_labels_match() -> None:
    samples = metrics.parse_prometheus('r{c="a",x="1"} 1\nr{c="a",x="2"} 2\nr{c="b",x="1"} 4\nq{c="a"} 8\n')
    assert metrics.metric_sum(samples, "r", c="a") == 3
    assert metrics.metric_sum(samples, "r") == 7
    assert metrics.metric_sum(samples, "r", c="z") == 0


# --- request accounting -------------------------------------------------------------------------------


def test_apiserver_requests_are_keyed_by_verb_resource_with_subresource_and_code() -> None:
    counts = metrics.apiserver_requests(metrics.parse_prometheus(APISERVER_PAGE))
    assert counts[("APPLY", "jobsets", "201")] == 7
    assert counts[("PATCH", "trainjobs/status", "200")] == 3
    assert counts[("GET", "configmaps", "404")] == 4


def test_subtract_keeps_only_what_grew() -> None:
    before = {("GET", "a", "200"): 5, ("GET", "b", "200"): 2}
    after = {("GET", "a", "200"): 8, ("GET", "b", "200"): 2, ("POST", "a", "201"): 1}
    assert metrics.subtract(after, before) == {("GET", "a", "200"): 3, ("POST", "a", "201"): 1}


def test_the_benchmarks_own_requests_watches_leases_and_paths_are_not_the_managers() -> None:
    delta = metrics.apiserver_requests(metrics.parse_prometheus(APISERVER_PAGE))
    own = {("POST", "trainjobs"): 10, ("APPLY", "jobsets"): 2}
    managers = metrics.managers_requests(delta, own)
    assert managers == {
        ("APPLY", "jobsets", "201"): 5,
        ("PATCH", "trainjobs/status", "200"): 3,
        ("GET", "configmaps", "404"): 4,
    }


def test_own_requests_are_taken_from_successful_answers_only() -> None:
    delta = {("POST", "trainjobs", "201"): 1, ("POST", "trainjobs", "409"): 2}
    assert metrics.managers_requests(delta, {("POST", "trainjobs"): 3}) == {("POST", "trainjobs", "409"): 2}


def test_writes_are_successful_writing_verbs_and_failures_are_counted_apart() -> None:
    summary = metrics.summarize_requests(
        {
            ("APPLY", "jobsets", "201"): 10,
            ("APPLY", "jobsets", "409"): 1,
            ("PATCH", "trainjobs/status", "200"): 10,
            ("GET", "configmaps", "404"): 10,
            ("LIST", "pods", "200"): 2,
        }
    )
    assert (summary.writes, summary.reads, summary.failed) == (20, 12, 11)
    assert summary.by_verb_resource["APPLY jobsets"] == 11
    assert summary.per(10)["GET configmaps"] == 1.0
    assert summary.per(0) == {}


# --- statistics ---------------------------------------------------------------------------------------


def test_percentile_interpolates_between_order_statistics() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert metrics.percentile(values, 0.0) == 1.0
    assert metrics.percentile(values, 1.0) == 4.0
    assert metrics.percentile(values, 0.5) == 2.5
    assert metrics.percentile([7.0], 0.99) == 7.0
    assert math.isnan(metrics.percentile([], 0.5))


def test_percentile_refuses_a_quantile_outside_zero_to_one() -> None:
    with pytest.raises(ValueError, match="q must be within"):
        metrics.percentile([1.0], 99)


def test_histogram_quantile_interpolates_inside_the_bucket_as_prometheus_does() -> None:
    buckets = [(0.1, 50.0), (1.0, 100.0), (math.inf, 100.0)]
    assert metrics.histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert metrics.histogram_quantile(0.75, buckets) == pytest.approx(0.55)
    assert metrics.histogram_quantile(0.25, buckets) == pytest.approx(0.05)


def test_a_quantile_in_the_infinite_bucket_is_the_highest_finite_bound() -> None:
    assert metrics.histogram_quantile(0.99, [(1.0, 1.0), (math.inf, 10.0)]) == 1.0
    assert math.isnan(metrics.histogram_quantile(0.5, [(1.0, 0.0), (math.inf, 0.0)]))


def test_histogram_buckets_sum_over_labels_and_subtract() -> None:
    page = 'h_bucket{le="0.1",x="a"} 1\nh_bucket{le="0.1",x="b"} 2\nh_bucket{le="+Inf",x="a"} 5\nh_count 5\n'
    buckets = metrics.histogram_buckets(metrics.parse_prometheus(page), "h")
    assert buckets == [(0.1, 3.0), (math.inf, 5.0)]
    assert metrics.subtract_buckets(buckets, [(0.1, 1.0)]) == [(0.1, 2.0), (math.inf, 5.0)]


# --- /proc --------------------------------------------------------------------------------------------


def test_cpu_seconds_are_user_plus_system_even_with_odd_command_names() -> None:
    fields = ["S", *["0"] * 10, "250", "150", *["0"] * 30]  # state, fields 4-13, utime, stime, the rest
    stat = "1234 (python (x) y) " + " ".join(fields)
    assert proc.proc_cpu_seconds(stat, 100) == 4.0


def test_rss_comes_from_vmrss_in_bytes() -> None:
    assert proc.proc_rss_bytes("Name:\tpython\nVmRSS:\t  2048 kB\nVmSwap:\t0 kB\n") == 2048 * 1024
    with pytest.raises(ValueError, match="no VmRSS"):
        proc.proc_rss_bytes("Name:\tzombie\n")


# --- "caches synced" from the logs --------------------------------------------------------------------


def test_our_controller_started_line_dates_caches_synced(tmp_path: Path) -> None:
    log = tmp_path / "manager.log"
    log.write_text(
        '{"event":"controller.started","controller":"trainjob_controller","timestamp":"2026-01-02T03:04:06.25Z"}\n'
        '{"event":"controller.started","controller":"trainingruntime_controller",'
        '"timestamp":"2026-01-02T03:04:09Z"}\n'
    )
    assert managers.ours_workers_started_at(log) == pytest.approx(1767323046.25)


# --- targets and the table ----------------------------------------------------------------------------


def test_targets_compare_ours_with_upstream_and_say_what_was_not_measured() -> None:
    scenarios = {
        "burst": {
            "ours": {"wall_s": 18.0, "requests": {"writes_per_trainjob": 2.0}, "reconcile_errors": 0,
                     "idle": {"writes": 0}, "cpu_s_per_trainjob": 0.003},
            "upstream": {"wall_s": 20.0, "requests": {"writes_per_trainjob": 2.0},
                         "cpu_s_per_trainjob": 0.004},
        },
        "scale": {
            "ours": {"rss_mib": 140.0, "rss_idle_mib": 120.0, "restart": {"rss_mib": 150.0}},
            "upstream": {"rss_idle_mib": 250.0, "restart": {"rss_mib": 250.0}},
        },
        "burst-lifted@no-podgroup-crds": {
            "ours": {"throughput_per_s": 110.0}, "upstream": {"throughput_per_s": 50.0},
        },
    }  # fmt: skip
    verdicts = {t.name: t for t in report.evaluate_targets(scenarios)}
    assert verdicts["burst wall time (shared limiter)"].met is True
    assert verdicts["burst wall time (shared limiter)"].measured == "0.90x"
    assert verdicts["API writes per TrainJob (burst)"].met is True
    assert verdicts["reconcile errors in a burst (ours)"].met is True
    assert verdicts["idle writes (ours)"].met is True
    assert verdicts["manager CPU per TrainJob (burst)"].met is False  # 0.75x, the target is 0.6x
    assert verdicts["RSS at scale, after idle"].met is True  # 0.48x
    assert verdicts["RSS right after the restart"].met is False  # 0.60x
    assert verdicts["restart RSS above settled (ours)"].measured == "10.00 MiB"
    assert verdicts["restart RSS above settled (ours)"].met is False
    assert verdicts["lifted burst throughput [no-podgroup-crds]"].met is True  # 2.2x
    assert "burst wall time (shared limiter) [no-podgroup-crds]" in verdicts  # the set-up was measured
    assert verdicts["steady 20/s p99 latency"].met is None
    assert verdicts["steady 20/s p99 latency"].measured == "n/a"


def test_targets_of_a_set_up_not_measured_are_left_out() -> None:
    names = {t.name for t in report.evaluate_targets({"burst": {"ours": {"wall_s": 1.0}}})}
    assert "burst wall time (shared limiter)" in names
    assert not any("no-podgroup-crds" in name for name in names)


def test_the_table_has_a_row_per_measured_figure_with_the_ratio() -> None:
    scenarios = {
        "burst": {"ours": {"trainjobs": 10, "wall_s": 1.0}, "upstream": {"trainjobs": 10, "wall_s": 2.0}}
    }
    rows = report.table_rows(scenarios)
    assert rows == [("burst of 10: all JobSets (s)", "1.00", "2.00", "0.50x")]
    text = report.format_table(rows, [])
    assert "burst of 10: all JobSets (s)" in text
    assert "0.50x" in text


def test_another_set_ups_rows_follow_the_defaults_prefixed_with_it_and_cache_sizes_are_rows() -> None:
    scenarios = {
        "burst": {"ours": {"trainjobs": 10, "wall_s": 1.0}, "upstream": {"trainjobs": 10, "wall_s": 2.0}},
        "scale@no-podgroup-crds": {
            "ours": {
                "trainjobs": 10,
                "rss_idle_mib": 100.0,
                "cache": {"JobSet": {"stripped_bytes": 7000.0, "transformed_bytes": 1300.0}},
            },
            "upstream": {"trainjobs": 10, "rss_idle_mib": 200.0},
        },
    }
    rows = report.table_rows(scenarios)
    assert rows == [
        ("burst of 10: all JobSets (s)", "1.00", "2.00", "0.50x"),
        ("[no-podgroup-crds] scale 10: RSS after 130 s idle (MiB)", "100", "200", "0.50x"),
        (
            "[no-podgroup-crds] scale: cache bytes per JobSet, managedFields stripped → transformed",
            "7000 → 1300",
            "",
            "",
        ),
    ]


def test_results_json_keeps_number_lists_on_one_line_and_has_no_nan() -> None:
    text = report.dump_json(
        {"a": [1.5, 2, math.nan], "b": {"c": 1.123456789}, "d": ["x", "y"], "e": Path("/p")}
    )
    assert '"a": [1.5, 2, null]' in text
    assert '"c": 1.12346' in text
    assert '"x",' in text  # lists of strings stay one item a line
    assert '"e": "/p"' in text


def test_top_frames_sums_self_time_of_each_leaf_across_stacks() -> None:
    collapsed = "a;b;leaf (x.py:1) 3\nc;leaf (x.py:1) 1\na;other (y.py:2) 4\nnot a stack line\n"
    assert proc.top_frames(collapsed) == [("leaf (x.py:1)", 0.5), ("other (y.py:2)", 0.5)]
    assert proc.top_frames("") == []


def test_steady_rates_are_the_numeric_keys_of_every_controllers_runs() -> None:
    steady = {"ours": {"50": {}, "20": {}, "measured_at": "x"}, "upstream": {"20": {}, "measured_at": "y"}}
    assert report.steady_rates(steady) == [20, 50]


# --- admission ----------------------------------------------------------------------------------------


def test_the_admission_webhooks_are_the_trainjob_ones_pointed_at_the_manager_by_url() -> None:
    configurations = managers.trainjob_webhook_configurations(9443, b"-----BEGIN CERTIFICATE-----\n")
    assert [(c["kind"], c["metadata"]["name"]) for c in configurations] == [
        ("MutatingWebhookConfiguration", "bench-trainjob-defaulter"),
        ("ValidatingWebhookConfiguration", "bench-trainjob-validator"),
    ]
    hooks = [hook for c in configurations for hook in c["webhooks"]]
    # upstream v2.3.0's paths (manifests/base/webhook/manifests.yaml)
    assert [hook["clientConfig"]["url"] for hook in hooks] == [
        "https://127.0.0.1:9443/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        "https://127.0.0.1:9443/validate-trainer-kubeflow-org-v1alpha1-trainjob",
    ]
    for hook in hooks:
        assert hook["clientConfig"]["caBundle"] == "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
        assert (hook["failurePolicy"], hook["sideEffects"]) == ("Fail", "None")
        assert hook["rules"] == [
            {
                "apiGroups": ["trainer.kubeflow.org"],
                "apiVersions": ["v1alpha1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["trainjobs"],
            }
        ]
        assert "service" not in hook["clientConfig"]
    assert [f"https://127.0.0.1:9443{path}" for path in managers.TRAINJOB_WEBHOOK_PATHS] == [
        hook["clientConfig"]["url"] for hook in hooks
    ]  # the paths the scenario reads the webhook request counters of


def test_distribution_gives_the_quantiles_and_nan_when_empty() -> None:
    from benchmark.scale import scenarios

    figures = scenarios.distribution([0.004, 0.001, 0.003, 0.002, 0.010])
    assert figures["count"] == 5 and figures["p50"] == pytest.approx(0.003)
    assert figures["max"] == 0.010 and figures["p99"] == pytest.approx(0.00976)
    empty = scenarios.distribution([])
    assert empty["count"] == 0 and math.isnan(empty["p50"]) and math.isnan(empty["max"])


def _admission(paced: tuple[float, float], burst: tuple[float, float], wall: float) -> dict[str, object]:
    return {
        "paced": {"rate_per_s": 20, "create_latency_s": {"p50": paced[0], "p99": paced[1]}},
        "burst": {
            "trainjobs": 1000,
            "create_latency_s": {"p50": burst[0], "p99": burst[1]},
            "wall_s": wall,
            "webhook_mean_s": 0.0015,
        },
    }


def test_admission_targets_are_ours_at_most_upstreams_for_each_figure() -> None:
    scenarios = {
        "admission": {
            "ours": _admission((0.006, 0.030), (0.050, 0.120), 19.0),
            "upstream": _admission((0.005, 0.040), (0.050, 0.100), 20.0),
        }
    }
    verdicts = {t.name: t for t in report.evaluate_targets(scenarios) if t.name.startswith("admission")}
    assert {name: (t.measured, t.met) for name, t in verdicts.items()} == {
        "admission: paced create p50": ("1.20x", False),
        "admission: paced create p99": ("0.75x", True),
        "admission: burst create p50": ("1.00x", True),
        "admission: burst create p99": ("1.20x", False),
        "admission: burst, all JobSets": ("0.95x", True),
    }
    assert all(t.wanted == "≤ 1x upstream" for t in verdicts.values())
    other = {
        t.name: t for t in report.evaluate_targets({"admission@no-podgroup-crds": scenarios["admission"]})
    }
    assert other["admission: burst, all JobSets [no-podgroup-crds]"].met is True
    assert other["admission: burst, all JobSets"].met is None  # the default set-up was not measured


def test_admission_rows_are_milliseconds_with_the_rate_and_the_burst_size() -> None:
    scenarios = {
        "admission": {
            "ours": _admission((0.0062, 0.030), (0.050, 0.120), 19.0),
            "upstream": _admission((0.0050, 0.040), (0.050, 0.100), 20.0),
        }
    }
    assert report.table_rows(scenarios) == [
        ("admission, 20 creates/s: create p50 (ms)", "6.2", "5.0", "1.24x"),
        ("admission, 20 creates/s: create p99 (ms)", "30.0", "40.0", "0.75x"),
        ("admission, burst of 1000: create p50 (ms)", "50.0", "50.0", "1.00x"),
        ("admission, burst of 1000: create p99 (ms)", "120.0", "100.0", "1.20x"),
        ("admission, burst of 1000: mean time in the webhook server (ms)", "1.50", "1.50", "1.00x"),
        ("admission, burst of 1000: all JobSets (s)", "19.00", "20.00", "0.95x"),
    ]


def test_the_throttled_admission_rows_name_their_limiter_and_have_no_target() -> None:
    def throttled(p50: float, while_creating: int) -> dict[str, object]:
        figures = _admission((0.006, 0.030), (p50, 0.120), 50.0)
        figures["limiter"] = {"qps": 20.0, "burst": 20}
        figures["burst"]["jobsets_while_creating"] = while_creating  # type: ignore[index]
        return figures

    scenarios = {"admission-throttled": {"ours": throttled(0.020, 80), "upstream": throttled(0.025, 70)}}
    rows = {label: rest for label, *rest in report.table_rows(scenarios)}
    assert rows["admission, limiter 20/20, burst of 1000: create p50 (ms)"] == ["20.0", "25.0", "0.80x"]
    assert rows["admission, limiter 20/20, burst of 1000: JobSets existing at the last create's answer"] == [
        "80",
        "70",
        "1.14x",
    ]
    assert not any(label.startswith("admission, 20 creates/s") for label in rows)  # the shipped one: absent
    verdicts = [t for t in report.evaluate_targets(scenarios) if t.name.startswith("admission")]
    assert verdicts and all(t.met is None for t in verdicts)  # targets are on the shipped limiter only


def test_webhook_figures_are_requests_per_path_and_the_mean_seconds_inside_the_server() -> None:
    from benchmark.scale import scenarios

    def page(mutate: int, validate: int, seconds: float) -> list[metrics.Sample]:
        lines = []
        for path, n in (
            ("/mutate-trainer-kubeflow-org-v1alpha1-trainjob", mutate),
            ("/validate-trainer-kubeflow-org-v1alpha1-trainjob", validate),
        ):
            lines += [
                f'controller_runtime_webhook_requests_total{{code="200",webhook="{path}"}} {n}',
                f'controller_runtime_webhook_latency_seconds_sum{{webhook="{path}"}} {seconds * n}',
                f'controller_runtime_webhook_latency_seconds_count{{webhook="{path}"}} {n}',
            ]
        return metrics.parse_prometheus("\n".join(lines) + "\n")

    figures = scenarios._webhook_figures(page(2, 2, 0.001), page(12, 12, 0.0015))
    assert figures["webhook_requests"] == {
        "/mutate-trainer-kubeflow-org-v1alpha1-trainjob": 10.0,
        "/validate-trainer-kubeflow-org-v1alpha1-trainjob": 10.0,
    }
    assert figures["webhook_mean_s"] == pytest.approx((0.018 * 2 - 0.002 * 2) / 20)
    assert math.isnan(scenarios._webhook_figures(page(1, 1, 0.1), page(1, 1, 0.1))["webhook_mean_s"])


def test_the_api_servers_view_is_the_mean_call_per_trainjob_webhook() -> None:
    from benchmark.scale import scenarios

    def page(calls: int, seconds: float) -> list[metrics.Sample]:
        lines = []
        for name, share in (
            ("defaulter.trainjob.trainer.kubeflow.org", 1.0),
            ("validator.trainjob.trainer.kubeflow.org", 2.0),
            ("validator.trainingruntime.trainer.kubeflow.org", 50.0),  # another webhook: not counted
        ):
            family = scenarios.APISERVER_WEBHOOK_DURATION
            labels = f'name="{name}",operation="CREATE",rejected="false",type="admit"'
            lines += [
                f"{family}_sum{{{labels}}} {seconds * share * calls}",
                f"{family}_count{{{labels}}} {calls}",
            ]
        return metrics.parse_prometheus("\n".join(lines) + "\n")

    figures = scenarios._apiserver_webhook_figures(page(10, 0.001), page(30, 0.002))
    means = figures["apiserver_webhook_mean_s"]
    assert means["defaulter"] == pytest.approx((30 * 0.002 - 10 * 0.001) / 20)
    assert means["validator"] == pytest.approx(2 * (30 * 0.002 - 10 * 0.001) / 20)
    quiet = scenarios._apiserver_webhook_figures(page(5, 0.1), page(5, 0.1))["apiserver_webhook_mean_s"]
    assert math.isnan(quiet["defaulter"]) and math.isnan(quiet["validator"])


def test_restarts_are_summarized_by_medians_the_largest_rss_and_sums_of_writes() -> None:
    from benchmark.scale import scenarios

    def restart(drained: float, cpu: float, rss: float, writes: int) -> dict[str, object]:
        return {
            "caches_synced_s": drained / 2,
            "drained_s": drained,
            "writes": writes,
            "reads": 0,
            "requests": {},
            "reconciles": 10.0,
            "reconcile_errors": 0.0,
            "cpu_s": cpu,
            "cpu_s_per_trainjob": cpu / 10,
            "rss_mib": rss,
            "load_after": [0.1, 0.2, 0.3],
        }

    runs = [restart(7.5, 6.3, 115, 0), restart(5.3, 4.4, 120, 1), restart(6.0, 5.0, 110, 0)]
    summary = scenarios._restart_summary(runs)
    assert (summary["drained_s"], summary["caches_synced_s"], summary["cpu_s"]) == (6.0, 3.0, 5.0)
    assert summary["cpu_s_per_trainjob"] == pytest.approx(0.5)
    assert summary["rss_mib"] == 120  # a spike in any restart shows
    assert summary["writes"] == 1  # a write in any restart shows
    assert [run["drained_s"] for run in summary["runs"]] == [7.5, 5.3, 6.0]
