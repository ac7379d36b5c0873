"""The REST client against the scripted HTTP stub: request shapes, pagination, retries, throttling, metrics.

The stub (``conftest.py``) documents what it does not model. Cases mirror controller-runtime's
``pkg/client/client_test.go`` (unstructured create/update/patch/apply/delete) and client-go's
``rest/request_test.go`` (``TestRequestWithRetry``, ``TestCheckRetryClosesBody``) and
``tools/pager/pager_test.go`` (``TestListPager_List``: paging, expired continue falls back to a full list).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

from controller import metrics
from controller.client import errors
from controller.client.client import Client
from controller.client.gvk import GVK
from controller.client.transport import Transport
from controller.clock import FakeClock

CM = GVK("", "v1", "ConfigMap")
NODE = GVK("", "v1", "Node")
TRAINJOB = GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob")


def cm(name: str, namespace: str = "ns", **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def requests_total(host: str, code: str, method: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "rest_client_requests_total", {"code": code, "method": method, "host": host}
    )
    return value or 0.0


# --- reads -------------------------------------------------------------------------------------------------


def test_get_returns_the_object_as_a_dict(stub: Any, client: Client) -> None:
    stub.route("GET", "/api/v1/namespaces/ns/configmaps/a", stub.Response(body=cm("a", x="1")))
    assert client.get(CM, "a", "ns") == cm("a", x="1")


def test_get_of_a_missing_object_raises_not_found(stub: Any, client: Client) -> None:
    with pytest.raises(errors.NotFound) as info:
        client.get(CM, "missing", "ns")
    assert info.value.status == 404


def test_a_namespaced_kind_without_a_namespace_fails_before_sending(stub: Any, client: Client) -> None:
    with pytest.raises(ValueError, match="namespaced"):
        client.get(CM, "a")
    with pytest.raises(ValueError, match="namespaced"):
        client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
    assert stub.requests == []


def test_list_pages_through_continue_tokens_and_fills_in_kinds(stub: Any, client: Client) -> None:
    # TestListPager_List: the pager follows continue tokens; items of a list carry no apiVersion/kind on the
    # wire, and the unstructured client fills them in from the list.
    pages = {
        None: {
            "metadata": {"resourceVersion": "10", "continue": "t1"},
            "items": [{"metadata": {"name": "a"}}],
        },
        "t1": {
            "metadata": {"resourceVersion": "10", "continue": "t2"},
            "items": [{"metadata": {"name": "b"}}],
        },
        "t2": {"metadata": {"resourceVersion": "10"}, "items": [{"metadata": {"name": "c"}}]},
    }
    stub.route(
        "GET", "/api/v1/namespaces/ns/configmaps", lambda r: stub.Response(body=pages[r.param("continue")])
    )
    result = client.list(CM, "ns", limit=1, label_selector="app=x")
    assert [i["metadata"]["name"] for i in result.items] == ["a", "b", "c"]
    assert all(i["apiVersion"] == "v1" and i["kind"] == "ConfigMap" for i in result.items)
    assert result.resource_version == "10"
    assert result.continue_ == ""
    sent = stub.requests_to("GET", "/api/v1/namespaces/ns/configmaps")
    assert [(r.param("limit"), r.param("continue"), r.param("labelSelector")) for r in sent] == [
        ("1", None, "app=x"),
        ("1", "t1", "app=x"),
        ("1", "t2", "app=x"),
    ]


def test_list_defaults_to_pages_of_500(stub: Any, client: Client) -> None:
    stub.route(
        "GET", "/api/v1/configmaps", stub.Response(body={"metadata": {"resourceVersion": "3"}, "items": []})
    )
    assert client.list(CM).resource_version == "3"
    assert stub.requests_to("GET", "/api/v1/configmaps")[0].param("limit") == "500"


def test_an_expired_continue_token_falls_back_to_one_full_list(stub: Any, client: Client) -> None:
    # TestListPager_List "FullListIfExpired": page 2 answers 410 Expired; one unpaginated list follows, at
    # the resourceVersion first asked for.
    def serve(r: Any) -> Any:
        if r.param("continue"):
            return stub.Response(status=410, body=stub.status(410, "Expired", "continue token expired"))
        if r.param("limit"):
            return stub.Response(body={"metadata": {"resourceVersion": "5", "continue": "t"}, "items": [{}]})
        return stub.Response(body={"metadata": {"resourceVersion": "9"}, "items": [{}, {}, {}]})

    stub.route("GET", "/api/v1/namespaces/ns/configmaps", serve)
    result = client.list(CM, "ns", limit=1, resource_version="0")
    assert len(result.items) == 3
    assert result.resource_version == "9"
    full = stub.requests_to("GET", "/api/v1/namespaces/ns/configmaps")[-1]
    assert full.param("limit") is None and full.param("resourceVersion") == "0"


def test_list_page_sends_exactly_what_the_reflector_asks(stub: Any, client: Client) -> None:
    stub.route(
        "GET",
        "/apis/trainer.kubeflow.org/v1alpha1/trainjobs",
        stub.Response(body={"metadata": {"resourceVersion": "7", "continue": "c", "remainingItemCount": 4}}),
    )
    page = client.list_page(
        TRAINJOB, resource_version="0", resource_version_match="NotOlderThan", limit=2, field_selector="a=b"
    )
    assert (page.items, page.resource_version, page.continue_, page.remaining_item_count) == ([], "7", "c", 4)
    sent = stub.requests[-1]
    assert {k: v[0] for k, v in sent.query.items()} == {
        "resourceVersion": "0",
        "resourceVersionMatch": "NotOlderThan",
        "limit": "2",
        "fieldSelector": "a=b",
    }


def test_the_lister_watcher_does_not_send_a_resource_version_with_a_continue_token(
    stub: Any, client: Client
) -> None:
    stub.route("GET", "/api/v1/namespaces/ns/configmaps", stub.Response(body={"metadata": {}, "items": []}))
    lw = client.lister_watcher(CM, "ns", label_selector="l=1")
    lw.list(resource_version="0", limit=500, continue_=None)
    lw.list(resource_version="0", limit=500, continue_="next")
    first, second = stub.requests
    assert (first.param("resourceVersion"), first.param("continue"), first.param("labelSelector")) == (
        "0",
        None,
        "l=1",
    )
    assert (second.param("resourceVersion"), second.param("continue")) == (None, "next")


# --- writes ------------------------------------------------------------------------------------------------


def test_create_posts_the_object_to_its_collection(stub: Any, client: Client) -> None:
    stub.route("POST", "/api/v1/namespaces/ns/configmaps", lambda r: stub.Response(status=201, body=r.body))
    created = client.create(cm("a", k="v"), field_manager="trainer")
    assert created == cm("a", k="v")
    sent = stub.requests[-1]
    assert sent.headers["Content-Type"] == "application/json"
    assert sent.param("fieldManager") == "trainer"
    assert sent.json() == cm("a", k="v")


def test_create_of_a_taken_name_raises_already_exists(stub: Any, client: Client) -> None:
    stub.route(
        "POST",
        "/api/v1/namespaces/ns/configmaps",
        stub.Response(status=409, body=stub.status(409, "AlreadyExists", 'configmaps "a" already exists')),
    )
    with pytest.raises(errors.AlreadyExists, match="already exists"):
        client.create(cm("a"))


def test_update_puts_the_whole_object_and_status_goes_to_the_subresource(stub: Any, client: Client) -> None:
    stub.route(
        "PUT",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/t",
        lambda r: stub.Response(body=r.body),
    )
    stub.route(
        "PUT",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/t/status",
        lambda r: stub.Response(body=r.body),
    )
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "t", "namespace": "ns"},
    }
    assert client.update(job) == job
    assert client.update_status({**job, "status": {"conditions": []}})["status"] == {"conditions": []}
    assert [r.path.rsplit("/", 1)[-1] for r in stub.requests] == ["t", "status"]


@pytest.mark.parametrize(
    ("patch_type", "patch", "content_type"),
    [
        ("merge", {"data": {"k": None}}, "application/merge-patch+json"),
        ("json", [{"op": "remove", "path": "/data/k"}], "application/json-patch+json"),
        ("strategic", {"data": {"k": "v"}}, "application/strategic-merge-patch+json"),
    ],
)
def test_each_patch_type_sends_its_content_type(
    stub: Any, client: Client, patch_type: Any, patch: Any, content_type: str
) -> None:
    stub.route("PATCH", "/api/v1/namespaces/ns/configmaps/a", stub.Response(body=cm("a")))
    client.patch(CM, "a", patch, "ns", patch_type)
    sent = stub.requests[-1]
    assert sent.headers["Content-Type"] == content_type
    assert sent.json() == patch


def test_an_unknown_patch_type_is_refused(client: Client) -> None:
    with pytest.raises(ValueError, match="patch type"):
        client.patch(CM, "a", {}, "ns", "apply")  # type: ignore[arg-type]


def test_patch_status_targets_the_status_subresource(stub: Any, client: Client) -> None:
    stub.route("PATCH", "/api/v1/nodes/n1/status", stub.Response(body={"kind": "Node"}))
    client.patch_status(NODE, "n1", {"status": {"phase": "x"}})
    assert stub.requests[-1].headers["Content-Type"] == "application/merge-patch+json"


def test_apply_is_a_patch_with_the_apply_content_type_manager_and_force(stub: Any, client: Client) -> None:
    stub.route("PATCH", "/api/v1/namespaces/ns/configmaps/a", lambda r: stub.Response(body=r.body))
    obj = cm("a", k="v")
    client.apply(obj, "trainer")
    client.apply(obj, "other", force=False)
    forced, unforced = stub.requests
    assert forced.headers["Content-Type"] == "application/apply-patch+yaml"
    assert forced.json() == obj  # JSON is YAML
    assert (forced.param("fieldManager"), forced.param("force")) == ("trainer", "true")
    assert (unforced.param("fieldManager"), unforced.param("force")) == ("other", "false")


def test_apply_needs_a_field_manager_and_a_name(client: Client) -> None:
    with pytest.raises(ValueError, match="field manager"):
        client.apply(cm("a"), "")
    with pytest.raises(ValueError, match="field manager"):
        client.apply(cm("a"), "m" * 129)
    with pytest.raises(ValueError, match=r"metadata\.name"):
        client.apply({"apiVersion": "v1", "kind": "Node", "metadata": {}}, "m")


def test_apply_status_targets_the_status_subresource(stub: Any, client: Client) -> None:
    stub.route("PATCH", "/api/v1/namespaces/ns/configmaps/a/status", lambda r: stub.Response(body=r.body))
    client.apply_status(cm("a"), "trainer")
    assert stub.requests[-1].headers["Content-Type"] == "application/apply-patch+yaml"


def test_delete_sends_delete_options_with_propagation_and_preconditions(stub: Any, client: Client) -> None:
    stub.route(
        "DELETE",
        "/api/v1/namespaces/ns/configmaps/a",
        stub.Response(body={"kind": "Status", "status": "Success"}),
    )
    client.delete(CM, "a", "ns")
    client.delete(CM, "a", "ns", "Foreground", uid="u-1", resource_version="42", grace_period_seconds=0)
    plain, guarded = (r.json() for r in stub.requests)
    assert plain == {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    assert guarded == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "u-1", "resourceVersion": "42"},
    }


def test_delete_refuses_an_unknown_propagation_policy(client: Client) -> None:
    with pytest.raises(ValueError, match="propagation_policy"):
        client.delete(CM, "a", "ns", "Sideways")


# --- Retry-After, throttling, metrics ---------------------------------------------------------------------


@pytest.fixture
def clocked(transport: Transport, clock: FakeClock) -> Iterator[Client]:
    c = Client(transport, qps=0, clock=clock)
    try:
        yield c
    finally:
        c.close()


def _in_thread(fn: Callable[[], Any], name: str) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run, name=f"test/{name}", daemon=True)
    thread.start()
    return thread, out


def test_a_get_answered_429_is_retried_after_retry_after(
    stub: Any, clocked: Client, clock: FakeClock, wait_until: Callable[..., None]
) -> None:
    # TestRequestWithRetry: 429 + Retry-After on a GET is retried after that many seconds.
    busy = stub.Response(
        status=429, body=stub.status(429, "TooManyRequests", "slow down"), headers={"Retry-After": "2"}
    )
    stub.route("GET", "/api/v1/namespaces/ns/configmaps/a", [busy, busy, stub.Response(body=cm("a"))])
    before = requests_total(clocked.transport.host, "429", "GET")
    thread, out = _in_thread(lambda: clocked.get(CM, "a", "ns"), "get")
    for sent in (1, 2):
        wait_until(lambda sent=sent: len(stub.requests) == sent and clock.waiters() == 1)
        clock.step(1)
        assert len(stub.requests) == sent  # one second is not enough
        clock.step(1)
    thread.join(5)
    assert out == [cm("a")]
    assert requests_total(clocked.transport.host, "429", "GET") - before == 2


def test_a_get_gives_up_after_ten_retries(stub: Any, client: Client) -> None:
    busy = stub.Response(
        status=429, body=stub.status(429, "TooManyRequests", "no"), headers={"Retry-After": "0"}
    )
    stub.route("GET", "/api/v1/namespaces/ns/configmaps/a", busy)
    with pytest.raises(errors.TooManyRequests) as info:
        client.get(CM, "a", "ns")
    assert info.value.retry_after == 0.0
    assert len(stub.requests) == 11


def test_a_5xx_without_retry_after_is_not_retried(stub: Any, client: Client) -> None:
    stub.route(
        "GET",
        "/api/v1/namespaces/ns/configmaps/a",
        stub.Response(status=500, body=stub.status(500, "InternalError", "boom")),
    )
    with pytest.raises(errors.ServerError, match="boom"):
        client.get(CM, "a", "ns")
    assert len(stub.requests) == 1


def test_a_write_answered_429_is_retried_after_retry_after_too(
    stub: Any, clocked: Client, clock: FakeClock, wait_until: Callable[..., None]
) -> None:
    # client-go retries any request whose body it can replay (bytes): the work queue, whose first retry
    # comes 5 ms later, would not honour the Retry-After of a write.
    busy = stub.Response(
        status=429, body=stub.status(429, "TooManyRequests", "busy"), headers={"Retry-After": "3"}
    )
    stub.route("PATCH", "/api/v1/namespaces/ns/configmaps/a", [busy, stub.Response(body=cm("a"))])
    thread, out = _in_thread(lambda: clocked.apply(cm("a"), "trainer"), "apply")
    wait_until(lambda: len(stub.requests) == 1 and clock.waiters() == 1)
    clock.step(2)
    assert len(stub.requests) == 1  # two seconds are not enough
    clock.step(1)
    thread.join(5)
    assert out == [cm("a")]
    assert len(stub.requests) == 2


def test_a_write_answered_429_without_retry_after_raises_at_once(stub: Any, client: Client) -> None:
    stub.route(
        "PATCH",
        "/api/v1/namespaces/ns/configmaps/a",
        stub.Response(status=429, body=stub.status(429, "TooManyRequests", "busy")),
    )
    with pytest.raises(errors.TooManyRequests) as info:
        client.apply(cm("a"), "trainer")
    assert info.value.retry_after is None
    assert len(stub.requests) == 1


def test_every_request_waits_for_the_token_bucket(
    stub: Any, transport: Transport, clock: FakeClock, wait_until: Callable[..., None]
) -> None:
    stub.route("GET", "/api/v1/namespaces/ns/configmaps/a", stub.Response(body=cm("a")))
    client = Client(transport, qps=1, burst=1, clock=clock)
    try:
        client.get(CM, "a", "ns")
        thread, out = _in_thread(lambda: client.get(CM, "a", "ns"), "throttled")
        wait_until(lambda: clock.waiters() == 1)
        assert len(stub.requests) == 1  # the second request has not left
        clock.step(1)
        thread.join(5)
        assert out == [cm("a")]
        assert len(stub.requests) == 2
    finally:
        client.close()


def test_each_resource_has_its_own_token_bucket(stub: Any, transport: Transport, clock: FakeClock) -> None:
    # controller-runtime builds one REST client, and so one client-go rate limiter, per resource type:
    # spending the burst on ConfigMaps leaves Nodes, TrainJobs and discovery their own whole burst.
    stub.route("GET", "/api/v1/namespaces/ns/configmaps/a", stub.Response(body=cm("a")))
    stub.route("GET", "/api/v1/nodes/n", stub.Response(body={"kind": "Node"}))
    stub.route("GET", "/version", stub.Response(body={"gitVersion": "v1.34.0"}))
    client = Client(transport, qps=1, burst=2, clock=clock)
    try:
        for _ in range(2):
            client.get(CM, "a", "ns")
            client.get(NODE, "n")
            client.get_raw("/version")
        assert len(stub.requests) == 6  # no request waited: the clock never moved
        configmaps = client.rate_limiter_for(client.resource_for(CM))
        nodes = client.rate_limiter_for(client.resource_for(NODE))
        trainjobs = client.rate_limiter_for(client.resource_for(TRAINJOB))
        discovery = client.rate_limiter_for(None)
        assert configmaps is not None and nodes is not None and trainjobs is not None and discovery
        assert len({id(configmaps), id(nodes), id(trainjobs), id(discovery)}) == 4
        assert configmaps is client.rate_limiter_for(client.resource_for(CM))  # one bucket per resource
        assert (configmaps.qps, configmaps.burst) == (1.0, 2)
        assert configmaps.wait_time() == nodes.wait_time() == discovery.wait_time() == 1.0
        assert trainjobs.wait_time() == 0.0 and trainjobs.try_accept() and trainjobs.try_accept()
        assert not trainjobs.try_accept()
    finally:
        client.close()


def test_a_client_with_qps_zero_has_no_token_buckets(transport: Transport) -> None:
    client = Client(transport, qps=0)
    try:
        assert client.rate_limiter_for(client.resource_for(CM)) is None
        assert client.rate_limiter_for(None) is None
        assert "unthrottled" in repr(client)
    finally:
        client.close()


def test_closing_the_client_aborts_a_request_waiting_for_its_turn(
    stub: Any, transport: Transport, clock: FakeClock, wait_until: Callable[..., None]
) -> None:
    client = Client(transport, qps=1, burst=1, clock=clock)
    limiter = client.rate_limiter_for(client.resource_for(CM))
    assert limiter is not None and limiter.try_accept()
    thread, out = _in_thread(lambda: client.get(CM, "a", "ns"), "aborted")
    wait_until(lambda: clock.waiters() == 1)
    client.close()
    clock.wake()
    thread.join(5)
    assert len(out) == 1 and isinstance(out[0], errors.ClientClosed)
    assert stub.requests == []
    with pytest.raises(errors.ClientClosed):
        client.get(CM, "a", "ns")


def test_requests_are_counted_by_code_method_and_host(stub: Any, client: Client) -> None:
    stub.route("GET", "/api/v1/namespaces/ns/configmaps/a", stub.Response(body=cm("a")))
    host = client.transport.host
    assert host.startswith("127.0.0.1:")
    ok, missing = requests_total(host, "200", "GET"), requests_total(host, "404", "GET")
    client.get(CM, "a", "ns")
    with pytest.raises(errors.NotFound):
        client.get(CM, "b", "ns")
    assert requests_total(host, "200", "GET") == ok + 1
    assert requests_total(host, "404", "GET") == missing + 1


def test_a_transport_failure_is_counted_as_error_and_raised_as_connection_failed() -> None:
    # A port nobody listens on (bound, then closed: the kernel refuses connections to it).
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    transport = Transport.for_url(f"http://127.0.0.1:{port}", connect_timeout=2)
    client = Client(transport, qps=0)
    try:
        before = requests_total(transport.host, "<error>", "GET")
        with pytest.raises(errors.ConnectionFailed, match="cannot connect") as info:
            client.get(CM, "a", "ns")
        # The refusal stays in the chain of causes, where the reflector looks for it (IsConnectionRefused).
        causes: list[BaseException] = []
        cause: BaseException | None = info.value
        while cause is not None and len(causes) < 10:
            causes.append(cause)
            cause = cause.__cause__ or getattr(cause, "reason", None)
        assert any(isinstance(c, ConnectionRefusedError) for c in causes), causes
        assert requests_total(transport.host, "<error>", "GET") == before + 1
    finally:
        client.close()


def test_get_raw_reads_any_path(stub: Any, client: Client) -> None:
    stub.route("GET", "/version", stub.Response(body={"major": "1", "minor": "36"}))
    assert client.get_raw("/version") == {"major": "1", "minor": "36"}


def test_the_mapper_discovers_custom_kinds_through_the_client(stub: Any, client: Client) -> None:
    stub.route(
        "GET",
        "/apis/example.com/v1",
        stub.Response(
            body={
                "groupVersion": "example.com/v1",
                "resources": [{"name": "widgets", "namespaced": True, "kind": "Widget"}],
            }
        ),
    )
    stub.route("GET", "/apis/example.com/v1/namespaces/ns/widgets/w", stub.Response(body={"kind": "Widget"}))
    assert client.get(GVK("example.com", "v1", "Widget"), "w", "ns") == {"kind": "Widget"}
    client.get(GVK("example.com", "v1", "Widget"), "w", "ns")
    assert len(stub.requests_to("GET", "/apis/example.com/v1")) == 1  # cached


def test_deep_copy_is_independent_of_the_original() -> None:
    from controller.client.object import deep_copy

    original = cm("a", k="v")
    copy = deep_copy(original)
    copy["data"]["k"] = "changed"
    assert original["data"]["k"] == "v"
    assert orjson.dumps(deep_copy(original)) == orjson.dumps(original)
