"""An endpoint worker's turns, step by step (pure units: the PostgreSQL calls and the sends
are stand-ins, the worker's own logic is the real one)."""

from __future__ import annotations

from typing import Any

from webhooks import worker as worker_module
from webhooks.selectors import EndpointConfig
from webhooks.worker import EndpointCounters, EndpointWorker, WorkerOptions

CONFIG = EndpointConfig(
    endpoint_id=1, name="t", url="http://receiver.example/hook", secret="s" * 20,
    secret_error="", event_types=frozenset(), boards=frozenset(),
)  # fmt: skip
OPTIONS = WorkerOptions(
    batch_size=100, queue_size=1000, connect_timeout=1.0, read_timeout=1.0, retry_first=1.0,
    retry_max=60.0, retry_hours=24.0, refresh_seconds=5.0, allow_private=True,
)  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _worker(clock: Clock) -> EndpointWorker:
    return EndpointWorker(
        config=CONFIG,
        options=OPTIONS,
        counters=EndpointCounters(),
        clock=clock,
        resolver=lambda host, port: ["127.0.0.1"],
        retrying=lambda what, call: call(),
    )


def test_a_worker_backing_off_waits_even_when_kept_batches_were_added_meanwhile() -> None:
    # kept_elsewhere() (the dispatcher's overflow) asked for a look at kept batches at once;
    # backing off, the worker returned from every wait at once: a busy loop for the whole
    # backoff (up to an hour), taking the GIL from the Kafka loop and every other endpoint.
    clock = Clock()
    worker = _worker(clock)
    worker._backoff_until = clock.now + 30
    worker.kept_elsewhere()
    waits: list[float] = []

    def record_wait(timeout: float | None = None) -> bool:
        waits.append(timeout or 0.0)
        return True

    worker._cond.wait = record_wait  # type: ignore[method-assign]
    worker._step()
    assert waits
    assert waits[0] > 0


def test_live_events_get_a_turn_between_kept_batches_due_one_after_another(monkeypatch) -> None:
    # A slow endpoint's overflow is kept due at once: kept batches were sent back to back and
    # the queue (whose events hold every endpoint's offsets) never went out.
    clock = Clock()
    worker = _worker(clock)
    sent: list[str] = []
    monkeypatch.setattr(worker_module, "webhook_delivery_claim_due", lambda **kwargs: object())
    monkeypatch.setattr(worker_module, "webhook_next_due_at", lambda **kwargs: clock.now)

    def send_kept(kept: Any) -> None:
        sent.append("kept")
        worker._next_kept_check = clock.now  # as after a kept batch delivered

    monkeypatch.setattr(worker, "_send_kept", send_kept)
    monkeypatch.setattr(worker, "_send_live", lambda items: sent.append(f"live {len(items)}"))
    worker._queue.extend(object() for _ in range(250))  # type: ignore[misc]
    for _ in range(6):
        worker._step()
    assert sent == ["kept", "live 100", "kept", "live 100", "kept", "live 50"]


class _StoppedWorker:
    def __init__(self) -> None:
        self.kept: bool | None = None

    def stop(self, *, keep_queued: bool) -> None:
        self.kept = keep_queued

    def join(self, timeout: float) -> bool:
        return True


def test_stopping_leaves_a_retired_worker_keeping_what_it_queued() -> None:
    # Its endpoint was deactivated: its queued events, read again after the restart, are not
    # routed to it any more. Told "keep nothing" at the stop, it lost them.
    from webhooks.deliverer import DelivererOptions, WebhookDeliverer

    deliverer = WebhookDeliverer(
        DelivererOptions.from_settings(topic="t", dead_letter_topic="t.dlq", group_id="g")
    )
    active, retired = _StoppedWorker(), _StoppedWorker()
    retired.kept = True  # as _refresh retired it
    deliverer._workers = {1: active}  # type: ignore[dict-item]
    deliverer._retired = [retired]  # type: ignore[list-item]
    deliverer._stop_workers()
    assert (active.kept, retired.kept) == (False, True)
