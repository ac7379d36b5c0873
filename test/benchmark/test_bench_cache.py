"""Benchmark: informer cache build time and memory per object, for 10k objects.

It measures cache build time per object and resident memory per object at 10k objects. Two shapes: a
TrainJob-sized object (~1.5 KB of JSON with managedFields) and a
Pod-sized one (~4.3 KB). Each object is served as JSON pages of 500 by a lister-watcher that decodes every
page with orjson, as the real client does, and stored by a ``SharedIndexInformer`` (namespace index, no
handlers). Every scenario runs in a fresh interpreter so GC state and RSS start clean.

Figures printed per scenario:

- ``build_us/obj``: wall time from ``start()`` to ``has_synced()`` (decode + transform + store + index),
  divided by the object count;
- ``traced_KiB/obj``: Python heap retained by the cache (tracemalloc, measured in a separate run, since
  tracing slows allocation), per object;
- ``rss_KiB/obj``: resident set growth of the process across the build, per object;
- ``full_gc_ms``: one full ``gc.collect()`` after the build: what every later oldest-generation collection
  costs while the cache is alive (near zero once the cache is frozen by the GC tactic).

Scenarios cover managedFields stripped (the default transform) or kept, and the reflector's GC tactic on or
off. Run with ``make bench`` or ``pytest test/benchmark/test_bench_cache.py -m benchmark -s``.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
N = 10_000

# --- the scenario, run in a fresh interpreter: python test_bench_cache.py KIND N STRIP GC TRACED ----------


def _managed_fields() -> list[dict[str, Any]]:
    container_key = 'k:{"name":"main"}'
    condition_key = 'k:{"type":"Ready"}'
    return [
        {
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:annotations": {".": {}, "f:note": {}},
                    "f:labels": {".": {}, "f:app": {}, "f:tier": {}},
                },
                "f:spec": {
                    "f:replicas": {},
                    "f:template": {
                        "f:spec": {
                            "f:containers": {
                                container_key: {".": {}, "f:image": {}, "f:name": {}, "f:resources": {}}
                            }
                        }
                    },
                },
            },
        },
        {
            "manager": "trainer-controller",
            "operation": "Apply",
            "apiVersion": "v1",
            "subresource": "status",
            "time": "2026-01-01T00:00:01Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {
                        condition_key: {
                            ".": {},
                            "f:status": {},
                            "f:type": {},
                            "f:lastTransitionTime": {},
                            "f:reason": {},
                            "f:message": {},
                        }
                    }
                }
            },
        },
    ]


def _meta(i: int, kind: str) -> dict[str, Any]:
    return {
        "name": f"{kind.lower()}-{i:05d}",
        "namespace": f"team-{i % 20}",
        "uid": f"6f1c{i:08d}-3b7e-4c1a-9d2e-5a8b7c6d{i % 10000:04d}",
        "resourceVersion": str(1000 + i),
        "generation": 3,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"app": "trainer", "tier": "ml", "trainer.kubeflow.org/trainjob-name": f"job-{i}"},
        "annotations": {"note": "benchmark object"},
        "managedFields": _managed_fields(),
    }


def trainjob(i: int) -> dict[str, Any]:
    """A TrainJob as the API server returns it: ~1.5 KB of JSON with managedFields."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": _meta(i, "TrainJob"),
        "spec": {
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
                "name": "torch-distributed",
            },
            "trainer": {
                "numNodes": 4,
                "image": "pytorch/pytorch:2.7.1",
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}},
            },
            "suspend": False,
        },
        "status": {
            "conditions": [
                {
                    "type": "Created",
                    "status": "True",
                    "reason": "JobsCreationSucceeded",
                    "message": "Succeeded to create Jobs",
                    "lastTransitionTime": "2026-01-01T00:00:01Z",
                }
            ]
        },
    }


def pod(i: int) -> dict[str, Any]:
    """A training Pod as the API server returns it: ~4.3 KB of JSON with managedFields."""
    env = {
        "PET_NNODES": 4,
        "PET_NPROC_PER_NODE": 8,
        "PET_NODE_RANK": i % 4,
        "PET_MASTER_PORT": 29500,
        "PET_MASTER_ADDR": f"job-{i}-node-0-0.job-{i}",
        "NCCL_DEBUG": "WARN",
        "OMP_NUM_THREADS": 2,
        "HF_HOME": "/workspace/cache/huggingface",
        "TRAINJOB_NAME": f"job-{i}",
        "TORCH_DISTRIBUTED_DEBUG": "OFF",
        "DATASET_URI": f"s3://datasets/bench/shard-{i % 97}",
    }
    container = {
        "name": "node",
        "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
        "command": ["torchrun", "train.py"],
        "ports": [{"containerPort": 29500, "protocol": "TCP"}],
        "env": [{"name": k, "value": str(v)} for k, v in env.items()],
        "resources": {
            "limits": {"nvidia.com/gpu": "8", "memory": "64Gi"},
            "requests": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "8"},
        },
        "volumeMounts": [
            {
                "name": "kube-api-access-x7k2p",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    meta = _meta(i, "Pod")
    meta["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": f"job-{i}-node-0",
            "uid": f"0a1b{i:08d}-aaaa-bbbb-cccc-0123456789ab",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    token_volume = {
        "name": "kube-api-access-x7k2p",
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
        },
    }
    tolerations = [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    ]
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:03Z"}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "containers": [container],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "nodeName": f"node-{i % 64}",
            "subdomain": f"job-{i}",
            "hostname": f"job-{i}-node-0-0",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": tolerations,
            "volumes": [token_volume],
        },
        "status": {
            "phase": "Running",
            "hostIP": "10.0.0.1",
            "podIP": f"10.1.{i % 250}.{i % 200}",
            "qosClass": "Burstable",
            "startTime": "2026-01-01T00:00:02Z",
            "conditions": conditions,
            "containerStatuses": [
                {
                    "name": "node",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "image": "docker.io/pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                    "imageID": "docker.io/pytorch/pytorch@sha256:" + "ab" * 32,
                    "containerID": "containerd://" + "cd" * 32,
                    "state": {"running": {"startedAt": "2026-01-01T00:00:04Z"}},
                }
            ],
        },
    }


class _PagedListerWatcher:
    """Serves pre-encoded JSON pages, decoding each on request as the client would; watches stay silent."""

    def __init__(self, pages: list[bytes]) -> None:
        self._pages = pages

    def list(self, resource_version: str, limit: int, continue_: str | None) -> Any:
        from controller.informers.reflector import ListPage

        index = int(continue_ or 0)
        items = orjson.loads(self._pages[index])["items"]
        more = str(index + 1) if index + 1 < len(self._pages) else None
        return ListPage(items, "99999", more)

    def watch(self, resource_version: str, timeout_seconds: int, allow_bookmarks: bool) -> Any:
        from controller.informers.testing import FakeWatcher

        return FakeWatcher()


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def scenario(kind: str, n: int, strip: bool, gc_tuning: bool, traced: bool) -> dict[str, float]:
    """Build one informer cache of ``n`` objects and measure it (see the module docstring)."""
    from controller.informers.shared_informer import SharedIndexInformer, strip_managed_fields
    from controller.informers.store import NAMESPACE_INDEX, meta_namespace_index_func

    make = trainjob if kind == "trainjob" else pod
    pages = [orjson.dumps({"items": [make(i) for i in range(s, min(s + 500, n))]}) for s in range(0, n, 500)]
    informer = SharedIndexInformer(
        _PagedListerWatcher(pages),
        name="bench",
        transform=strip_managed_fields if strip else None,
        indexers={NAMESPACE_INDEX: meta_namespace_index_func},
        gc_tuning=gc_tuning,
        use_watch_list=False,  # what is measured is a cache built from list pages
    )
    gc.collect()
    rss0 = _rss()
    if traced:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    informer.start()
    assert informer.wait_for_synced(600)
    build = time.perf_counter() - t0
    assert len(informer.get_store()) == n
    heap = 0
    if traced:
        heap = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
    t1 = time.perf_counter()
    gc.collect()
    full_gc = time.perf_counter() - t1
    rss1 = _rss()
    informer.stop()
    return {
        "json_bytes": len(orjson.dumps(make(0))),
        "build_s": build,
        "heap": heap,
        "rss": rss1 - rss0,
        "full_gc_s": full_gc,
    }


def _run(kind: str, strip: bool, gc_tuning: bool, traced: bool) -> dict[str, float]:
    args = [kind, str(N), str(int(strip)), str(int(gc_tuning)), str(int(traced))]
    out = subprocess.run(
        [sys.executable, __file__, *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=600
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.benchmark
def test_bench_cache_build_and_memory_per_object() -> None:
    rows = []
    for kind in ("trainjob", "pod"):
        for strip in (True, False):
            for gc_tuning in (True, False):
                timed = _run(kind, strip, gc_tuning, traced=False)
                traced = _run(kind, strip, gc_tuning, traced=True)
                rows.append((kind, strip, gc_tuning, timed, traced))
    print()
    print(f"informer cache build, {N} objects per scenario (a fresh interpreter each; JSON pages of 500)")
    print(
        f"{'kind':9} {'json_B':>6} {'managedFields':>13} {'gc_tactic':>9} {'build_us/obj':>12} "
        f"{'traced_KiB/obj':>14} {'rss_KiB/obj':>11} {'full_gc_ms':>10}"
    )
    for kind, strip, gc_tuning, timed, traced in rows:
        print(
            f"{kind:9} {int(timed['json_bytes']):>6} {'stripped' if strip else 'kept':>13} "
            f"{'on' if gc_tuning else 'off':>9} {timed['build_s'] / N * 1e6:>12.1f} "
            f"{traced['heap'] / N / 1024:>14.2f} {timed['rss'] / N / 1024:>11.2f} "
            f"{timed['full_gc_s'] * 1e3:>10.1f}"
        )
    assert all(row[3]["build_s"] > 0 for row in rows)


if __name__ == "__main__":
    kind_arg, n_arg, strip_arg, gc_arg, traced_arg = sys.argv[1:6]
    figures = scenario(kind_arg, int(n_arg), strip_arg == "1", gc_arg == "1", traced_arg == "1")
    print(json.dumps(figures))
