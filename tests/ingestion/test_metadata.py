"""Score metadata (contract 0.3) end to end: results through the batch handler into PostgreSQL and
Redis, entries through the API with the metadata of the result that gives each player's value,
whatever the delivery order and however often a result is delivered."""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from closeout.selectors import board_standings_compute
from closeout.services import final_standings_replace
from ingestion.records import ConsumedRecord
from ingestion.schema import INVALID_METADATA, METADATA_TOO_LARGE
from ingestion.services import match_results_ingest
from leaderboard.models import Board, BoardOrder, MatchResult, ScoringRule
from leaderboard.selectors.boards import BoardRef
from leaderboard.selectors.top import top_snapshot_memo_clear
from leaderboard.services import board_rebuild, top_snapshot_refresh
from seasons.models import SeasonStatus
from tests.factories import board_factory
from tests.helpers import make_season
from tests.ingestion.ingest_helpers import LetterSink, ingest_redelivered

pytestmark = pytest.mark.django_db(transaction=True)

TOPIC = "metadata-test"
START = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday: ISO week 2026-W10


@dataclass(frozen=True)
class Sent:
    match_id: uuid.UUID
    player_id: int
    points: int
    achieved_at: datetime
    metadata: dict[str, Any] | None
    board: str

    def value(self, season_id: int) -> bytes:
        body: dict[str, Any] = {
            "matchId": str(self.match_id),
            "playerId": self.player_id,
            "seasonId": season_id,
            "points": self.points,
            "achievedAt": self.achieved_at.isoformat(),
            "board": self.board,
        }
        if self.metadata is not None:
            body["metadata"] = self.metadata
        return json.dumps(body).encode()


def _deciding(rule: str, order: str, results: list[Sent]) -> dict[int, Sent]:
    """The reference: per player, the result whose metadata the contract says the entry
    carries (best: the best value, first reached; latest: the latest; cumulative: the most
    recent), ties in achievedAt going to the greater matchId as on the board."""
    by_player: dict[int, list[Sent]] = {}
    for r in results:
        by_player.setdefault(r.player_id, []).append(r)
    chosen: dict[int, Sent] = {}
    for player, mine in by_player.items():
        if rule == ScoringRule.BEST:
            best = (min if order == BoardOrder.ASC else max)(r.points for r in mine)
            tied = [r for r in mine if r.points == best]
            first = min(r.achieved_at for r in tied)
            chosen[player] = max((r for r in tied if r.achieved_at == first), key=_mid)
        else:
            chosen[player] = max(mine, key=lambda r: (r.achieved_at, _mid(r)))
    return chosen


def _mid(r: Sent) -> uuid.UUID:
    return r.match_id


def _ingest(season_id: int, results: list[Sent], rng: random.Random) -> LetterSink:
    return ingest_redelivered(
        topic=TOPIC, deliveries=[(r.player_id, r.value(season_id)) for r in results], rng=rng
    )


def _results(board: str, rng: random.Random, *, players: int = 8, each: int = 5) -> list[Sent]:
    results = []
    for player in range(1, players + 1):
        for n in range(each):
            # Few distinct points and times, so ties on points and on achievedAt happen.
            at = START + timedelta(hours=rng.choice([1, 2, 3, 30]), seconds=rng.choice([0, 0, 7]))
            metadata = None if rng.random() < 0.2 else {"car": f"c{player}-{n}", "lap": n + 0.5}
            results.append(
                Sent(uuid.uuid4(), player, rng.choice([10, 20, 30]), at, metadata, board)
            )
    return results


BOARDS = [
    ("best-desc", ScoringRule.BEST, BoardOrder.DESC),
    ("best-asc", ScoringRule.BEST, BoardOrder.ASC),
    ("latest", ScoringRule.LATEST, BoardOrder.DESC),
    ("cumulative", ScoringRule.CUMULATIVE, BoardOrder.DESC),
]


def _entries_metadata(body: list[dict[str, Any]]) -> dict[int, Any]:
    return {e["playerId"]: e["metadata"] for e in body}


@pytest.mark.parametrize("seed", [1, 2])
def test_every_read_carries_the_deciding_results_metadata_whatever_the_delivery(
    client, seed
) -> None:
    rng = random.Random(seed)
    season = make_season(starts_at=START - timedelta(days=1))
    sent: dict[str, list[Sent]] = {}
    for slug, rule, order in BOARDS:
        board_factory(season, slug, rule=rule, order=order, keeps_metadata=True)
        sent[slug] = _results(slug, rng)
    letters = _ingest(season.id, [r for rs in sent.values() for r in rs], rng)
    assert letters.letters == []

    base = f"/api/seasons/{season.id}/boards"
    listed = {b["slug"]: b["keepsMetadata"] for b in client.get(base).json()}
    assert listed == {"main": False, **{slug: True for slug, _, _ in BOARDS}}
    for slug, rule, order in BOARDS:
        want = {p: r.metadata for p, r in _deciding(rule, order, sent[slug]).items()}
        top = client.get(f"{base}/{slug}/top?limit=100")
        assert top.status_code == 200
        assert _entries_metadata(top.json()) == want, slug
        ranks = client.get(f"{base}/{slug}/ranks?start=1&count=100").json()
        assert _entries_metadata(ranks) == want, slug
        ids = ",".join(str(p) for p in want)
        friends = client.get(f"{base}/{slug}/friends?ids={ids}").json()
        assert _entries_metadata(friends) == want, slug
        for player, metadata in want.items():
            entry = client.get(f"{base}/{slug}/players/{player}").json()
            assert entry["metadata"] == metadata, (slug, player)
        around = client.get(f"{base}/{slug}/players/1/around?radius=20").json()
        assert _entries_metadata(around) == want, slug

        # The daily and weekly boards: the deciding result among that period's results.
        day = START.date()
        day_results = [r for r in sent[slug] if r.achieved_at.date() == day]
        daily = client.get(f"{base}/{slug}/daily/{day.isoformat()}/top?limit=100").json()
        day_want = {p: r.metadata for p, r in _deciding(rule, order, day_results).items()}
        assert _entries_metadata(daily) == day_want, slug
        weekly = client.get(f"{base}/{slug}/weekly/2026-W10/top?limit=100")
        assert weekly.status_code == 200
        assert _entries_metadata(weekly.json()) == want, slug

        # Close-out's standings carry it too (computed from PostgreSQL, stored, served).
        board = BoardRef.from_model(Board.objects.get(season=season, slug=slug))
        rows = board_standings_compute(board=board, limit=100)
        assert {row.player_id: row.metadata for row in rows} == want, slug
        final_standings_replace(board=board, rows=rows)

    season.status = SeasonStatus.CLOSED
    season.save(update_fields=["status"])
    for slug, rule, order in BOARDS:
        want = {p: r.metadata for p, r in _deciding(rule, order, sent[slug]).items()}
        standings = client.get(f"{base}/{slug}/standings?limit=100")
        assert standings.status_code == 200, standings.content
        assert _entries_metadata(standings.json()["entries"]) == want, slug


def test_a_rebuild_keeps_the_metadata_and_a_voided_deciding_result_stops_deciding(
    client,
) -> None:
    season = make_season(starts_at=START - timedelta(days=1))
    board_factory(season, "laps", rule=ScoringRule.BEST, order=BoardOrder.ASC, keeps_metadata=True)
    fast = Sent(uuid.uuid4(), 7, 81_000, START + timedelta(hours=1), {"car": "fast"}, "laps")
    slow = Sent(uuid.uuid4(), 7, 83_000, START + timedelta(hours=2), {"car": "slow"}, "laps")
    _ingest(season.id, [fast, slow], random.Random(3))
    url = f"/api/seasons/{season.id}/boards/laps/players/7"
    assert client.get(url).json()["metadata"] == {"car": "fast"}
    # The top list's snapshot stores the metadata with the entries.
    ref = BoardRef.from_model(Board.objects.get(season=season, slug="laps"))
    top_snapshot_memo_clear()
    top_snapshot_refresh(board=ref)
    top = client.get(f"/api/seasons/{season.id}/boards/laps/top")
    assert top["X-Leaderboard-Source"] == "snapshot"
    assert [e["metadata"] for e in top.json()] == [{"car": "fast"}]
    # Looked up once per entry and score: a second read and a refresh of the same top list
    # ask PostgreSQL nothing for it; a new score is a new lookup (below, after the void).
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).json()["metadata"] == {"car": "fast"}
        top_snapshot_refresh(board=ref)
    assert not [q for q in queries.captured_queries if "LATERAL" in q["sql"]]
    page = client.get(f"/seasons/{season.id}/boards/laps").content.decode()
    assert '<th scope="col">Details</th>' in page
    assert '<td class="meta">car: fast</td>' in page

    board = Board.objects.get(season=season, slug="laps")
    board_rebuild(board_id=board.id)
    assert client.get(url).json()["metadata"] == {"car": "fast"}

    MatchResult.objects.filter(match_id=fast.match_id).update(voided_at=START)
    board_rebuild(board_id=board.id)
    body = client.get(url).json()
    assert (body["points"], body["metadata"]) == (83_000, {"car": "slow"})


def test_bad_metadata_is_dead_lettered_and_a_board_without_metadata_stores_and_shows_none(
    client,
) -> None:
    season = make_season(starts_at=START - timedelta(days=1))
    at = START + timedelta(hours=1)
    kept = Sent(uuid.uuid4(), 1, 50, at, {"car": "x"}, "main")
    too_large = Sent(uuid.uuid4(), 2, 50, at, {"a": "é" * 253}, "main")
    letters = _ingest(season.id, [kept, too_large], random.Random(4))
    not_object = ConsumedRecord(
        0, 100, b"3", kept.value(season.id).replace(b'{"car": "x"}', b'["car"]')
    )
    match_results_ingest(topic=TOPIC, records=[not_object], dead_letters=letters)

    codes = {letter.code for letter in letters.letters}
    assert codes == {METADATA_TOO_LARGE, INVALID_METADATA}
    assert all(letter.record.value is not None for letter in letters.letters)
    # main keeps no metadata: the valid result counts, stores none, and entries leave it out.
    assert list(MatchResult.objects.values_list("player_id", "metadata")) == [(1, None)]
    entry = client.get(f"/api/seasons/{season.id}/leaderboard/players/1").json()
    assert entry["points"] == 50
    assert "metadata" not in entry
    assert all(
        "metadata" not in e for e in client.get(f"/api/seasons/{season.id}/leaderboard/top").json()
    )


def test_metadata_postgresql_cannot_store_is_dead_lettered_and_the_batch_goes_on(client) -> None:
    # Valid JSON that jsonb refuses (a NUL) or that has no JSON form once parsed (1e400 reads as
    # infinity): stored, the batch's insert failed, or the value became null.
    season = make_season(starts_at=START - timedelta(days=1))
    board_factory(season, "laps", keeps_metadata=True)
    at = START + timedelta(hours=1)
    good = Sent(uuid.uuid4(), 1, 50, at, {"car": "x"}, "laps")
    unstorable = [b'{"car": "\\u0000"}', b'{"\\u0000": 1}', b'{"a": [{"b": "x\\u0000"}]}']
    unstorable += [b'{"a": 1e400}', b'{"a": -1e999, "b": 18446744073709551616}']
    records = [ConsumedRecord(0, 0, b"1", good.value(season.id))]
    for n, metadata in enumerate(unstorable, start=2):
        sent = Sent(uuid.uuid4(), n, 60, at, {"car": "placeholder"}, "laps").value(season.id)
        raw = sent.replace(b'{"car": "placeholder"}', metadata)
        records.append(ConsumedRecord(0, n, str(n).encode(), raw))
    letters = LetterSink()
    match_results_ingest(topic=TOPIC, records=records, dead_letters=letters)

    assert {
        int(letter.record.key or b""): letter.code for letter in letters.letters
    } == dict.fromkeys(range(2, 2 + len(unstorable)), INVALID_METADATA)
    assert list(MatchResult.objects.values_list("player_id", "metadata")) == [(1, {"car": "x"})]
    entry = client.get(f"/api/seasons/{season.id}/boards/laps/players/1").json()
    assert entry["metadata"] == {"car": "x"}


def test_integers_past_64_bits_in_metadata_read_back_exactly(client) -> None:
    # Stored exactly (jsonb's numeric); read back by orjson they were floats (1.23e+29).
    season = make_season(starts_at=START - timedelta(days=1))
    board_factory(season, "laps", keeps_metadata=True)
    at = START + timedelta(hours=1)
    big = 123456789012345678901234567890
    raw = Sent(uuid.uuid4(), 1, 50, at, {"car": "placeholder"}, "laps").value(season.id)
    raw = raw.replace(b'{"car": "placeholder"}', b'{"n": %d, "u": 18446744073709551615}' % big)
    letters = LetterSink()
    match_results_ingest(
        topic=TOPIC, records=[ConsumedRecord(0, 0, b"1", raw)], dead_letters=letters
    )
    assert letters.letters == []
    response = client.get(f"/api/seasons/{season.id}/boards/laps/players/1")
    assert json.loads(response.content)["metadata"] == {"n": big, "u": 2**64 - 1}
    assert b'"n":%d' % big in response.content.replace(b" ", b"")
