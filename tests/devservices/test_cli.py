"""The command line: arguments checked before anything runs, each command dispatched, a
ServiceError turned into ``[services] ERROR: ...`` and exit status 1."""

from __future__ import annotations

import pytest

from devservices import cli, commands, faults
from devservices.commands import Status, status_line
from devservices.errors import ServiceError


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["restart"],
        ["redis-cluster-kill"],
        ["redis-cluster-kill", "seven"],
        ["kafka-broker-kill", "4"],
        ["kafka-broker-start", "0"],
        ["start", "extra"],
    ],
)
def test_bad_arguments_exit_2_before_anything_runs(argv: list[str], monkeypatch) -> None:
    monkeypatch.setattr(cli, "run", lambda args: pytest.fail("must not run"))
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == cli.EXIT_USAGE


def test_fault_commands_reach_their_function_with_the_parsed_target(monkeypatch, capsys) -> None:
    calls: list[tuple[str, int]] = []
    for name in (
        "redis_cluster_kill",
        "redis_cluster_start",
        "kafka_broker_kill",
        "kafka_broker_start",
    ):

        def fake(target: int, config: object, name: str = name) -> str:
            calls.append((name, target))
            return name

        monkeypatch.setattr(faults, name, fake)
    assert cli.main(["redis-cluster-kill", "17003"]) == 0
    assert cli.main(["kafka-broker-start", "2"]) == 0
    assert calls == [("redis_cluster_kill", 17003), ("kafka_broker_start", 2)]
    assert capsys.readouterr().out.splitlines() == ["redis_cluster_kill", "kafka_broker_start"]


def test_a_service_error_is_one_error_line_and_exit_1(monkeypatch, capsys) -> None:
    def refuse(config):
        raise ServiceError("port 15432 is in use by another process (nc (pid 9)); stop it")

    monkeypatch.setattr(commands, "start", refuse)
    assert cli.main(["start"]) == cli.EXIT_FAILED
    assert capsys.readouterr().err == (
        "[services] ERROR: port 15432 is in use by another process (nc (pid 9)); stop it\n"
    )


def test_status_exits_3_when_something_does_not_answer(monkeypatch, capsys) -> None:
    monkeypatch.setattr(commands, "status", lambda config: (["a line"], commands.STATUS_DOWN))
    assert cli.main(["status"]) == 3
    assert capsys.readouterr().out == "a line\n"


def test_a_bad_variable_is_an_error_not_a_traceback(monkeypatch, capsys) -> None:
    monkeypatch.setenv("LB_KAFKA_BROKERS", "2")
    assert cli.main(["status"]) == cli.EXIT_FAILED
    assert "LB_KAFKA_BROKERS=2: use 1 or 3" in capsys.readouterr().err


def test_status_lines_say_ours_external_or_stopped() -> None:
    assert status_line(Status("redis", 41, 16379, True)) == (
        "redis     running             pid=41       port=16379  answering"
    )
    assert status_line(Status("kafka", None, 9092, True)) == (
        "kafka     running (external)  pid=-        port=9092   answering"
    )
    assert status_line(Status("rc:17000", None, 17000, False)) == (
        "rc:17000  stopped             pid=-        port=17000  not answering"
    )
