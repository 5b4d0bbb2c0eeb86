"""The Celery application (Celery's Django example, configured from Django settings)."""

import logging
import logging.config
import os
from typing import Any

from celery import Celery, Task
from celery.signals import (
    beat_init,
    setup_logging,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_shutdown,
)
from celery.worker.consumer import Consumer
from celery.worker.request import Request

from . import task_metrics

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard_project.settings")

logger = logging.getLogger(__name__)


class BrokerLossTolerantRequest(Request):
    """A task request whose late ack cannot kill the worker after a broker connection loss.

    Every task acks late (``CELERY_TASK_ACKS_LATE``). When the broker connection drops while a
    task runs, the worker closes that connection (kombu sets its transport's ``client`` to
    None) and reconnects; the task then finishes and acks its message on the closed channel,
    where kombu's Redis transport raises ``AttributeError: 'NoneType' object has no attribute
    'hostname'``. That is no connection error to Celery, so it escapes the event loop as an
    "Unrecoverable error" and the worker exits for good (celery 5.7.0 / kombu 5.7.0, the
    newest; the family of celery/celery#10205). A message received on a closed connection
    can't be acked anyway: skip the ack and say so. The broker delivers the message again
    (at least once, as acks_late already means for every task here) or, if it lost it in
    the restart, the next periodic run does the work.
    """

    def _received_on_closed_connection(self) -> bool:
        channel = self.message.channel
        if channel is None:
            return False  # kombu's own MessageStateError says more than we could
        transport = getattr(channel, "connection", None)
        return transport is None or getattr(transport, "client", True) is None

    def acknowledge(self) -> None:
        if not self.acknowledged and self._received_on_closed_connection():
            logger.warning(
                "Not acking %s[%s]: the broker connection it came on was lost meanwhile",
                self.name,
                self.id,
            )
            return
        super().acknowledge()

    def reject(self, requeue: bool = False) -> None:
        if not self.acknowledged and self._received_on_closed_connection():
            logger.warning(
                "Not rejecting %s[%s]: the broker connection it came on was lost meanwhile",
                self.name,
                self.id,
            )
            return
        super().reject(requeue=requeue)


class BrokerLossTolerantConsumer(Consumer):
    """The worker's consumer, which reconnects even when closing the lost connection fails.

    On a broker connection loss Celery closes the old connection before it reconnects.
    With messages still unacked (a late-acked task in flight), closing the channel puts them
    back on the broker; if the broker is down at that moment, kombu has by then cleared the
    transport's ``client`` and raises ``AttributeError ... 'hostname'`` instead of a
    connection error, which Celery treats as unrecoverable: the worker exits (reproduced in
    tests/leaderboard_project/test_broker_restart.py). The connection is already dropped
    from the consumer when that happens, so carrying on into Celery's reconnect loop is
    safe; the unacked messages stay in the broker's unacked set, which redelivers them
    after its visibility timeout (if the broker kept them at all).
    """

    def on_connection_error_after_connected(self, exc: Exception) -> None:
        try:
            super().on_connection_error_after_connected(exc)
        except AttributeError:
            logger.warning(
                "Broker connection lost (%r); closing it failed on kombu's closed transport, "
                "reconnecting anyway",
                exc,
                exc_info=True,
            )


class LeaderboardTask(Task):
    Request = "leaderboard_project.celery:BrokerLossTolerantRequest"


# task_cls: every @shared_task of the apps gets the request class above.
app = Celery("leaderboard_project", task_cls=LeaderboardTask)
# Every CELERY_* Django setting configures Celery; settings.py is the only reader of the env.
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def _logging_from_django_settings(**kwargs: Any) -> None:
    """Worker and beat log through settings.LOGGING (LOG_FORMAT, LOG_LEVEL, the filters)
    instead of Celery's own root handler; a receiver here makes Celery leave logging alone."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


@beat_init.connect
def _reconcile_at_start(sender: Any = None, **kwargs: Any) -> None:
    """Queue the reconcile once when beat starts (unless staff switched it off): its schedule
    would first run it an interval (an hour) later, and a restart of everything is when Redis
    most likely lost its last writes."""
    from django_celery_beat.models import PeriodicTask

    from .schedules import RECONCILE_TASK_NAME

    row = PeriodicTask.objects.filter(name=RECONCILE_TASK_NAME, enabled=True).first()
    if row is not None:
        app.send_task(row.task, queue=row.queue or None)


@task_prerun.connect
def _task_prerun(task_id: str | None = None, **kwargs: Any) -> None:
    if task_id is not None:
        task_metrics.task_started(task_id=task_id)


@task_postrun.connect
def _task_postrun(
    task_id: str | None = None, task: Any = None, state: str | None = None, **kwargs: Any
) -> None:
    if task_id is not None:
        task_metrics.task_finished(
            task_id=task_id, task_name=getattr(task, "name", "unknown"), state=state
        )


@worker_init.connect
def _worker_metrics(**kwargs: Any) -> None:
    task_metrics.worker_metrics_start()


@worker_process_shutdown.connect
def _pool_process_exited(**kwargs: Any) -> None:
    task_metrics.pool_process_exited()
