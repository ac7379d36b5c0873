"""Serves calls of the Kubeflow SDK's ``TrainerClient`` as JSON lines: one request in, one answer out.

Not a test module: ``test_kubeflow_sdk.py`` runs it with the Python of the SDK's own virtualenv, where the
``kubeflow`` package is installed unmodified with the ``kubernetes`` client it pins, so nothing of this
project is importable here (and nothing of the SDK in the project's environment). One process serves a
whole test module: importing the SDK takes seconds (its pydantic models), a call takes milliseconds.

Protocol (UTF-8, one JSON object per line):

- At start, after the imports: ``{"ready": {"kubeflow": <version>, "kubernetes": <version>}}``.
- Request: ``{"namespace": NS, "call": CALL, "args": {...}}``. Answer: ``{"result": <JSON>}``, or
  ``{"error": {"type", "message", "cause"}}`` when the SDK raised (the SDK wraps API errors in
  ``RuntimeError``; ``cause`` is the wrapped one). End of input ends the process.
- ``TrainerClient(KubernetesBackendConfig(namespace=NS))`` is made once per namespace; the kubeconfig comes
  from ``KUBECONFIG``, as the SDK reads it by default.

Calls (the SDK method of the same name, its result turned into JSON: dataclasses as objects of their
public fields plus ``command`` for a runtime's trainer, enums as values, datetimes in ISO 8601):

- ``list_runtimes``, ``get_job {name}``, ``list_jobs``, ``get_job_events {name}``, ``delete_job {name}``;
- ``get_job_logs {name, step}``: the lines as a list;
- ``wait_for_job_status {name, status, timeout}``: polling every second;
- ``train_custom {name, runtime, num_nodes}``: ``train`` with ``CustomTrainer(func=train_fn, num_nodes,
  resources_per_node={"cpu": 1})`` and the ``Name`` option; returns the TrainJob's name;
- ``train_container {name, runtime, image, num_nodes, env?}``: ``train`` with ``CustomTrainerContainer(image,
  num_nodes, env)`` (the runtime's own command runs in ``image``; ``env`` a name-to-value object) and the
  ``Name`` option;
- ``get_trainer_status {name}``: the TrainJob's ``status.trainerStatus`` as the SDK's own client reads it,
  or null. ``get_job`` drops it (its ``TrainJob`` type has no such field), so this takes the path
  ``get_job`` takes, the backend's ``custom_api.get_namespaced_custom_object`` decoded into the SDK's API
  model ``TrainerV1alpha1TrainJob`` (``kubeflow_trainer_api``), and answers that model's ``trainer_status``
  by its wire names (``to_dict``; ``lastUpdatedTime`` in ISO 8601);
- ``train_builtin {name, runtime}``: ``train`` with a ``BuiltinTrainer`` whose ``TorchTuneConfig`` asks for
  one epoch, batch size 2 and LoRA (rank 4 on q_proj and v_proj), one node.

Everything the SDK prints or logs goes to stderr; stdout carries the protocol only.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import importlib.metadata
import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from kubeflow.trainer import (
    BuiltinTrainer,
    CustomTrainer,
    CustomTrainerContainer,
    KubernetesBackendConfig,
    LoraConfig,
    TorchTuneConfig,
    TrainerClient,
)
from kubeflow.trainer.constants import constants
from kubeflow.trainer.options import Name
from kubeflow_trainer_api import models


def train_fn() -> None:
    """The user's training function: the SDK ships its source in the container command; kwok never runs it."""
    import os

    print(f"kubeflow-sdk-e2e: training on node {os.environ.get('PET_NODE_RANK')}")


def to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {
            f.name: to_json(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not f.name.startswith("_")
        }
        # RuntimeTrainer keeps its command in a private field behind a property.
        if isinstance(getattr(type(value), "command", None), property):
            out["command"] = to_json(value.command)
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [to_json(v) for v in value]
    return value


def trainer_status(client: TrainerClient, name: str) -> Any:
    """``status.trainerStatus`` through the SDK's client and API model (see the module docstring)."""
    backend = client.backend
    raw = backend.custom_api.get_namespaced_custom_object(
        constants.GROUP, constants.VERSION, backend.namespace, constants.TRAINJOB_PLURAL, name
    )
    trainjob = models.TrainerV1alpha1TrainJob.from_dict(raw)
    if trainjob is None or trainjob.status is None or trainjob.status.trainer_status is None:
        return None
    return to_json(trainjob.status.trainer_status.to_dict())


def _calls(client: TrainerClient, args: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    return {
        "list_runtimes": client.list_runtimes,
        "get_job": lambda: client.get_job(args["name"]),
        "list_jobs": client.list_jobs,
        "get_job_events": lambda: client.get_job_events(args["name"]),
        "get_job_logs": lambda: list(client.get_job_logs(args["name"], step=args.get("step", "node-0"))),
        "delete_job": lambda: client.delete_job(args["name"]),
        "wait_for_job_status": lambda: client.wait_for_job_status(
            args["name"], status=set(args["status"]), timeout=args["timeout"], polling_interval=1
        ),
        "train_custom": lambda: client.train(
            runtime=args["runtime"],
            trainer=CustomTrainer(func=train_fn, num_nodes=args["num_nodes"], resources_per_node={"cpu": 1}),
            options=[Name(args["name"])],
        ),
        "train_container": lambda: client.train(
            runtime=args["runtime"],
            trainer=CustomTrainerContainer(
                image=args["image"], num_nodes=args["num_nodes"], env=args.get("env")
            ),
            options=[Name(args["name"])],
        ),
        "get_trainer_status": lambda: trainer_status(client, args["name"]),
        "train_builtin": lambda: client.train(
            runtime=args["runtime"],
            trainer=BuiltinTrainer(
                config=TorchTuneConfig(
                    epochs=1,
                    batch_size=2,
                    num_nodes=1,
                    peft_config=LoraConfig(lora_rank=4, lora_attn_modules=["q_proj", "v_proj"]),
                )
            ),
            options=[Name(args["name"])],
        ),
    }


def answer(clients: dict[str, TrainerClient], request: dict[str, Any]) -> dict[str, Any]:
    try:
        namespace = request["namespace"]
        if namespace not in clients:
            clients[namespace] = TrainerClient(KubernetesBackendConfig(namespace=namespace))
        call = _calls(clients[namespace], request.get("args") or {})[request["call"]]
        return {"result": to_json(call())}
    except Exception as exc:  # the test asserts on the SDK's errors too
        cause = exc.__cause__
        return {
            "error": {
                "type": type(exc).__name__,
                "message": str(exc),
                "cause": None if cause is None else f"{type(cause).__name__}: {cause}",
            }
        }


def serve(requests: TextIO, answers: TextIO) -> None:
    versions = {p: importlib.metadata.version(p) for p in ("kubeflow", "kubernetes")}
    answers.write(json.dumps({"ready": versions}) + "\n")
    answers.flush()
    clients: dict[str, TrainerClient] = {}
    for line in requests:
        if line.strip():
            answers.write(json.dumps(answer(clients, json.loads(line))) + "\n")
            answers.flush()


if __name__ == "__main__":
    protocol = sys.stdout
    sys.stdout = sys.stderr  # anything the SDK prints stays out of the protocol
    serve(sys.stdin, protocol)
