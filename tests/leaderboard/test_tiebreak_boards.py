"""Boards with tie-break columns (contract 0.3) end to end: results with tiebreakers through the
batch handler into PostgreSQL and Redis, redelivered and out of order, every read against a
reference sort of the whole key, and a rebuild from PostgreSQL giving the same board."""

from __future__ import annotations

import json
import random
import threading
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from django.db import connection

from closeout.selectors import board_standings_compute
from closeout.services import final_standings_replace
from ingestion.records import ConsumedRecord
from ingestion.schema import INVALID_TIEBREAKERS
from ingestion.services import match_results_ingest
from leaderboard import keys
from leaderboard.codec import TIEBREAK_VALUE_MAX
from leaderboard.models import Board, BoardOrder, MatchResult, ScoringRule, TiebreakColumn
from leaderboard.redis import get_board_redis
from leaderboard.selectors.boards import BoardRef
from leaderboard.selectors.top import top_snapshot_memo_clear
from leaderboard.services import (
    board_rebuild,
    board_reconcile,
    boards_correct,
    boards_recover,
    match_result_void,
    player_ban,
    top_snapshot_refresh,
    weekly_board_build,
)
from seasons.models import SeasonStatus
from tests.factories import board_factory
from tests.helpers import make_season
from tests.ingestion.ingest_helpers import LetterSink, ingest_redelivered

pytestmark = pytest.mark.django_db(transaction=True)

TOPIC = "tiebreak-test"
START = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday: ISO week 2026-W10
MAX = TIEBREAK_VALUE_MAX


@dataclass(frozen=True)
class Sent:
    match_id: uuid.UUID
    player_id: int
    points: int
    tiebreakers: dict[str, int]
    achieved_at: datetime
    board: str

    def value(self, season_id: int) -> bytes:
        return json.dumps(
            {
                "matchId": str(self.match_id),
                "playerId": self.player_id,
                "seasonId": season_id,
                "points": self.points,
                "achievedAt": self.achieved_at.isoformat(),
                "board": self.board,
                "tiebreakers": self.tiebreakers,
            }
        ).encode()


@dataclass(frozen=True)
class Spec:
    slug: str
    rule: str
    order: str
    columns: tuple[TiebreakColumn, ...]


SPECS = [
    Spec(
        f"{rule}-{order}-{len(columns)}",
        rule,
        order,
        tuple(TiebreakColumn(name, o) for name, o in columns),
    )
    for rule in ScoringRule.values
    for order in BoardOrder.values
    for columns in (
        (("kills", "desc"),),
        (("kills", "desc"), ("deaths", "asc")),
        (("a", "asc"), ("b", "desc"), ("c", "asc")),
    )
]


def _ticks(at: datetime, season_start: datetime) -> int:
    return int((at - season_start).total_seconds())


def _value(spec: Spec, points: int, tiebreakers: tuple[int, ...], ticks: int) -> tuple:
    """The contract's order as a tuple that sorts best first."""
    signs = [spec.order == BoardOrder.ASC, *(c.ascending for c in spec.columns)]
    values = (points, *tiebreakers)
    return (*(v if asc else -v for v, asc in zip(values, signs, strict=True)), ticks)


def _reference(spec: Spec, results: list[Sent], season_start: datetime) -> list[dict[str, Any]]:
    """The board as the contract defines it: entries best first with competition ranks."""
    names = [c.name for c in spec.columns]
    held: dict[int, tuple[int, tuple[int, ...], int]] = {}
    chosen: dict[int, tuple] = {}
    for r in sorted(results, key=lambda r: (r.achieved_at, r.match_id)):
        values = tuple(r.tiebreakers[n] for n in names)
        ticks = _ticks(r.achieved_at, season_start)
        old = held.get(r.player_id)
        if spec.rule == ScoringRule.CUMULATIVE and old is not None:
            sums = (old[0] + r.points, tuple(a + b for a, b in zip(old[1], values, strict=True)))
            if max(sums[0], *sums[1]) > MAX:
                continue
            held[r.player_id] = (*sums, ticks)
        elif spec.rule == ScoringRule.BEST and old is not None:
            if _value(spec, r.points, values, ticks) < _value(spec, *old):
                held[r.player_id] = (r.points, values, ticks)
        else:
            held[r.player_id] = (r.points, values, ticks)
    for player, (points, values, ticks) in held.items():
        chosen[player] = _value(spec, points, values, ticks)
    ordered = sorted(held, key=lambda p: (chosen[p], str(p)))
    entries = []
    for player in ordered:
        points, values, _ = held[player]
        rank = 1 + sum(1 for other in held if chosen[other] < chosen[player])
        entries.append(
            {
                "rank": rank,
                "playerId": player,
                "points": points,
                "tiebreakers": dict(zip(names, values, strict=True)),
            }
        )
    return entries


def _results(spec: Spec, rng: random.Random, *, players: int = 12, each: int = 4) -> list[Sent]:
    # The maxima, and under the cumulative rule sums far past 53 bits that stay within them
    # (a sum past the maximum: test_wide_apply.py).
    pool = [0, 1, 2, MAX] if spec.rule != ScoringRule.CUMULATIVE else [0, 1, MAX // 8]
    results = []
    for player in range(1, players + 1):
        for _ in range(each):
            # Few distinct values and times: ties on every column and on the time happen.
            at = START + timedelta(hours=rng.choice([1, 2, 30]), seconds=rng.choice([0, 0, 7]))
            results.append(
                Sent(
                    uuid.uuid4(),
                    player,
                    rng.choice(pool),
                    {c.name: rng.choice(pool) for c in spec.columns},
                    at,
                    spec.slug,
                )
            )
    return results


def _ingest(season_id: int, results: list[Sent], rng: random.Random) -> LetterSink:
    return ingest_redelivered(
        topic=TOPIC,
        deliveries=[(r.player_id, r.value(season_id)) for r in results],
        rng=rng,
        batch=9,
    )


def _shape(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: e[k] for k in ("rank", "playerId", "points", "tiebreakers")} for e in entries]


def _check_reads(client, season_id: int, spec: Spec, want: list[dict[str, Any]]) -> None:
    base = f"/api/seasons/{season_id}/boards/{spec.slug}"
    top = client.get(f"{base}/top?limit=100")
    assert top.status_code == 200, top.content
    assert _shape(top.json()) == want, spec.slug
    assert _shape(client.get(f"{base}/ranks?start=1&count=100").json()) == want
    assert _shape(client.get(f"{base}/ranks?start=3&count=4").json()) == want[2:6]
    ids = ",".join(str(e["playerId"]) for e in reversed(want))
    assert _shape(client.get(f"{base}/friends?ids={ids}").json()) == want
    for position, expected in enumerate(want):
        body = client.get(f"{base}/players/{expected['playerId']}").json()
        assert {k: body[k] for k in expected} == expected, (spec.slug, expected)
        assert body["total"] == len(want)
        around = client.get(f"{base}/players/{expected['playerId']}/around?radius=2").json()
        assert _shape(around) == want[max(0, position - 2) : position + 3]


@pytest.mark.parametrize("spec", SPECS, ids=[s.slug for s in SPECS])
def test_every_rule_order_and_width_ranks_by_the_whole_key(client, spec) -> None:
    rng = random.Random(spec.slug)
    season = make_season(starts_at=START - timedelta(days=1), ends_at=START + timedelta(days=30))
    board_factory(season, spec.slug, rule=spec.rule, order=spec.order, tiebreaks=spec.columns)
    sent = _results(spec, rng)
    letters = _ingest(season.id, sent, rng)
    assert letters.letters == []
    want = _reference(spec, sent, season.starts_at)
    _check_reads(client, season.id, spec, want)

    # The daily and weekly boards hold that period's results by the same rules.
    base = f"/api/seasons/{season.id}/boards/{spec.slug}"
    day = START.date()
    daily = client.get(f"{base}/daily/{day.isoformat()}/top?limit=100").json()
    day_results = [r for r in sent if r.achieved_at.date() == day]
    assert _shape(daily) == _reference(spec, day_results, season.starts_at)
    board = BoardRef.from_model(Board.objects.get(season=season, slug=spec.slug))
    weekly_board_build(board=board, iso_year=2026, iso_week=10)
    weekly = client.get(f"{base}/weekly/2026-W10/top?limit=100").json()
    assert _shape(weekly) == want

    # Lost from Redis and rebuilt from PostgreSQL: the same board.
    redis = get_board_redis()
    live = keys.board(board_id=board.id)
    redis.delete(live, keys.board_index(board_key=live))
    assert board_rebuild(board_id=board.id).members == len(want)
    _check_reads(client, season.id, spec, want)

    # Close-out's standings, from PostgreSQL: the same order, an exact tie to the lower id.
    rows = board_standings_compute(board=board, limit=100)
    final_standings_replace(board=board, rows=rows)
    season.status = SeasonStatus.CLOSED
    season.save(update_fields=["status"])
    standings = client.get(f"{base}/standings?limit=100")
    assert standings.status_code == 200, standings.content
    by_value = sorted(want, key=lambda e: (e["rank"], e["playerId"]))
    assert [
        {k: e[k] for k in ("rank", "playerId", "points", "tiebreakers")}
        for e in standings.json()["entries"]
    ] == [{**e, "rank": i} for i, e in enumerate(by_value, start=1)]


def test_results_without_exactly_the_boards_columns_are_dead_lettered(client) -> None:
    season = make_season(starts_at=START - timedelta(days=1))
    columns = (TiebreakColumn("kills", "desc"), TiebreakColumn("deaths", "asc"))
    board_factory(season, "arena", tiebreaks=columns)
    at = START + timedelta(hours=1)
    good = Sent(uuid.uuid4(), 1, MAX, {"kills": MAX, "deaths": 0}, at, "arena")
    missing = Sent(uuid.uuid4(), 2, 5, {"kills": 1}, at, "arena")
    too_big = Sent(uuid.uuid4(), 3, 5, {"kills": MAX + 1, "deaths": 0}, at, "arena")
    on_plain = Sent(uuid.uuid4(), 4, 5, {"kills": 1}, at, "main")
    letters = _ingest(season.id, [good, missing, too_big, on_plain], random.Random(5))
    rejected = {int(letter.record.key or b""): letter.code for letter in letters.letters}
    assert rejected == {2: INVALID_TIEBREAKERS, 3: INVALID_TIEBREAKERS, 4: INVALID_TIEBREAKERS}
    body = client.get(f"/api/seasons/{season.id}/boards/arena/top").json()
    assert body == [
        {
            "rank": 1,
            "playerId": 1,
            "points": MAX,
            "displayName": None,
            "country": None,
            "tiebreakers": {"kills": MAX, "deaths": 0},
        }
    ]
    listed = {
        b["slug"]: b["tiebreakers"] for b in client.get(f"/api/seasons/{season.id}/boards").json()
    }
    assert listed == {
        "main": [],
        "arena": [{"name": "kills", "order": "desc"}, {"name": "deaths", "order": "asc"}],
    }
    # The top list's snapshot stores the tie-break values with the entries.
    top_snapshot_memo_clear()
    top_snapshot_refresh(board=BoardRef.from_model(Board.objects.get(season=season, slug="arena")))
    snapshot = client.get(f"/api/seasons/{season.id}/boards/arena/top")
    assert snapshot["X-Leaderboard-Source"] == "snapshot"
    assert snapshot.json() == body
    main = client.get(f"/api/seasons/{season.id}/leaderboard/top").json()
    assert main == []
    assert "tiebreakers" not in json.dumps(main)


@pytest.mark.parametrize("rule", ScoringRule.values)
def test_results_ingested_during_every_rebuild_phase_count_once(client, rule) -> None:
    spec = Spec(
        f"during-{rule}",
        rule,
        BoardOrder.DESC,
        (TiebreakColumn("kills", "desc"), TiebreakColumn("deaths", "asc")),
    )
    rng = random.Random(rule)
    season = make_season(starts_at=START - timedelta(days=1), ends_at=START + timedelta(days=30))
    board = board_factory(season, spec.slug, rule=rule, tiebreaks=spec.columns)
    before = _results(spec, rng, players=6, each=2)
    _ingest(season.id, before, rng)
    during: list[Sent] = []
    offset = [10_000]

    def ingest_now(phase: str) -> None:
        # New results while the rebuild runs, at each phase of its protocol.
        batch = _results(spec, rng, players=8, each=1)
        records = []
        for r in batch:
            records.append(ConsumedRecord(2, offset[0], b"%d" % r.player_id, r.value(season.id)))
            offset[0] += 1

        errors: list[BaseException] = []

        def ingest() -> None:
            try:
                match_results_ingest(topic=TOPIC, records=records, dead_letters=LetterSink())
            except BaseException as exc:
                errors.append(exc)
            finally:
                connection.close()

        # A consumer of its own: the callback at "activated" runs inside the rebuild's
        # snapshot transaction, whose connection must not store the results.
        worker = threading.Thread(target=ingest)
        worker.start()
        worker.join()
        assert not errors, errors
        during.extend(batch)

    result = board_rebuild(board_id=board.id, on_phase=ingest_now)
    want = _reference(spec, before + during, season.starts_at)
    assert result.members == len(want)
    assert result.delta_members > 0
    _check_reads(client, season.id, spec, want)


def test_reconcile_finds_a_wrong_key_and_a_stray_member_and_the_rebuild_repairs_them(
    client,
) -> None:
    spec = Spec(
        "reconciled",
        ScoringRule.BEST,
        BoardOrder.DESC,
        (TiebreakColumn("kills", "desc"), TiebreakColumn("deaths", "asc")),
    )
    rng = random.Random(11)
    season = make_season(starts_at=START - timedelta(days=1), ends_at=START + timedelta(days=30))
    board = board_factory(season, spec.slug, tiebreaks=spec.columns)
    sent = _results(spec, rng)
    _ingest(season.id, sent, rng)
    want = _reference(spec, sent, season.starts_at)
    clean = board_reconcile(board_id=board.id, topic=TOPIC)
    assert (clean.drift_found, clean.rebuilt, clean.full) == (False, False, True)

    redis = get_board_redis()
    live = keys.board(board_id=board.id)
    index = keys.board_index(board_key=live)
    wide = BoardRef.from_model(board).wide_codec
    assert wide is not None
    # One player's key rewritten (both structures, consistently), one member without an index
    # entry (a half-applied write).
    player = want[0]["playerId"]
    old = cast(bytes, redis.hget(index, str(player))).decode()
    forged = wide.encode(points=0, tiebreakers=(0, MAX), elapsed_ticks=0)
    redis.zrem(live, old + str(player))
    redis.zadd(live, {forged + str(player): 0})
    redis.hset(index, str(player), forged)
    drifted = board_reconcile(board_id=board.id, topic=TOPIC)
    assert (drifted.drift_found, drifted.rebuilt) == (True, True)
    _check_reads(client, season.id, spec, want)

    redis.zadd(live, {forged + "999999": 0})
    stray = board_reconcile(board_id=board.id, topic=TOPIC)
    assert (stray.drift_found, stray.rebuilt) == (True, True)
    _check_reads(client, season.id, spec, want)


def test_a_board_redis_lost_is_recovered_and_a_void_corrected_by_the_whole_key(client) -> None:
    spec = Spec(
        "recovered",
        ScoringRule.BEST,
        BoardOrder.ASC,
        (TiebreakColumn("sectors", "asc"), TiebreakColumn("style", "desc")),
    )
    rng = random.Random(13)
    now = datetime.now(UTC).replace(microsecond=0)
    season = make_season(
        starts_at=now - timedelta(days=3),
        ends_at=now + timedelta(days=3),
        status=SeasonStatus.ACTIVE,
    )
    board = board_factory(season, spec.slug, order=spec.order, tiebreaks=spec.columns)
    sent = [
        replace(r, achieved_at=now - timedelta(hours=rng.choice([1, 2, 30])))
        for r in _results(spec, rng)
    ]
    _ingest(season.id, sent, rng)
    want = _reference(spec, sent, season.starts_at)
    _check_reads(client, season.id, spec, want)

    # Redis loses every key of the board (this test's own prefix).
    redis = get_board_redis()
    for key in redis.scan_iter(match=keys.prefix_pattern(), count=1000):
        redis.unlink(key)
    assert client.get(f"/api/seasons/{season.id}/boards/{spec.slug}/top").status_code == 503
    report = boards_recover(now=now, topic=TOPIC)
    assert board.id in {r.board_id for r in report.recovered}
    _check_reads(client, season.id, spec, want)
    assert not board_reconcile(board_id=board.id, topic=TOPIC).drift_found

    # Staff void the leader's deciding result: the board follows the whole key without it.
    leader = want[0]
    deciding = [
        r
        for r in sent
        if r.player_id == leader["playerId"]
        and r.points == leader["points"]
        and [r.tiebreakers[c.name] for c in spec.columns] == list(leader["tiebreakers"].values())
    ]
    stored = MatchResult.objects.filter(match_id__in=[r.match_id for r in deciding])
    for result in stored:
        correction = match_result_void(result_id=result.id, reason="cheated")
    boards_correct(season_id=season.id, days=correction.days)
    kept = [r for r in sent if r.match_id not in {d.match_id for d in deciding}]
    _check_reads(client, season.id, spec, _reference(spec, kept, season.starts_at))


@pytest.mark.parametrize("days", [7, 366], ids=["week", "year"])
def test_reconcile_counts_cumulative_players_by_the_wide_keys_limits(days: int) -> None:
    """The players a cumulative board leaves off are those whose points or a column's sum pass
    TIEBREAK_VALUE_MAX, whatever the plain codec's maximum for the season's length (above it
    for a week, 268,435,455 for a year): counting by the plain codec found drift where there
    was none, and the hourly reconcile rebuilt the board every time."""
    spec = Spec(
        "cumulative-sums",
        ScoringRule.CUMULATIVE,
        BoardOrder.DESC,
        (TiebreakColumn("kills", "desc"), TiebreakColumn("damage", "desc")),
    )
    season = make_season(starts_at=START - timedelta(days=1), ends_at=START + timedelta(days=days))
    board = board_factory(season, spec.slug, rule=spec.rule, tiebreaks=spec.columns)
    at = START + timedelta(hours=1)

    def sent(player: int, points: int, damage: int, n: int) -> Sent:
        return Sent(
            uuid.UUID(int=player * 10 + n),
            player,
            points,
            {"kills": 1, "damage": damage},
            at + timedelta(seconds=n),
            spec.slug,
        )

    results = [
        sent(1, 150_000_000, 1, 0),  # 300,000,000 in all: past a year's plain maximum, fits
        sent(1, 150_000_000, 1, 1),
        sent(2, MAX, 1, 0),  # past MAX in points: off the board
        sent(2, 1, 1, 1),
        sent(3, 10, MAX, 0),  # past MAX in a column's sum: off the board
        sent(3, 10, 1, 1),
        sent(4, 10, 1, 0),
    ]
    _ingest(season.id, results, random.Random(5))
    # From PostgreSQL, as a reconcile's repair would: what the board holds by definition (the
    # apply script kept players 2 and 3 at their first value and left the overflow off).
    board_rebuild(board_id=board.id)
    assert get_board_redis().zcard(keys.board(board_id=board.id)) == 2
    result = board_reconcile(board_id=board.id, topic=TOPIC)
    assert (result.drift_found, result.rebuilt) == (False, False)


def test_columns_named_like_a_dicts_methods_show_on_the_page(client) -> None:
    """A column named values, items or keys: the templates looked it up as a key of the entry's
    tiebreakers before the method, and the board page answered 500."""
    columns = (TiebreakColumn("values", "desc"), TiebreakColumn("items", "asc"))
    season = make_season(starts_at=START - timedelta(days=1), ends_at=START + timedelta(days=30))
    board_factory(season, "named", tiebreaks=columns)
    at = START + timedelta(hours=1)
    sent = [
        Sent(uuid.UUID(int=1), 1, 50, {"values": 7, "items": 3}, at, "named"),
        Sent(uuid.UUID(int=2), 2, 50, {"values": 9, "items": 4}, at, "named"),
    ]
    _ingest(season.id, sent, random.Random(3))
    page = client.get(f"/seasons/{season.id}/boards/named")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<td class="num">9</td><td class="num">4</td>' in html
    assert '<td class="num">7</td><td class="num">3</td>' in html


def test_a_ban_takes_the_player_off_a_wide_week_whose_first_days_expired() -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    season = make_season(
        starts_at=now - timedelta(days=60), ends_at=now + timedelta(days=3), status="active"
    )
    board = board_factory(season, "kills", tiebreaks=(TiebreakColumn("kills", "desc"),))
    start = season.starts_at.date()
    monday = start + timedelta(days=7 - start.weekday())
    noon = datetime.combine(monday, datetime.min.time(), tzinfo=UTC) + timedelta(hours=12)
    sent = [
        Sent(uuid.uuid4(), player, 10, {"kills": player}, noon + timedelta(days=days), "kills")
        for player, days in ((1, 0), (2, 3), (3, 4))
    ]
    _ingest(season.id, sent, random.Random(3))
    iso_year, iso_week, _ = monday.isocalendar()
    ref = BoardRef.from_model(board)
    weekly_board_build(board=ref, iso_year=iso_year, iso_week=iso_week)
    weekly = keys.weekly_board(board_id=board.id, iso_year=iso_year, iso_week=iso_week)
    redis = get_board_redis()
    index = keys.board_index(board_key=weekly)
    assert {int(p) for p in redis.hkeys(index)} == {1, 2, 3}
    redis.unlink(keys.daily_board(board_id=board.id, day=monday))  # expired

    correction = player_ban(season_id=season.id, player_id=2, reason="cheat")
    boards_correct(season_id=season.id, days=correction.days, subjects=correction.subjects)
    # Left as built (player 1's Monday is gone from Redis), without the banned player: off
    # the set and its index alike.
    assert {int(p) for p in redis.hkeys(index)} == {1, 3}
    members = [m.decode() for m in cast(list[bytes], redis.zrange(weekly, 0, -1))]
    assert len(members) == 2
    assert not any(m.endswith("2") for m in members)
