"""Every player's history: archived after the close-out from PostgreSQL, served newest first,
pruned after its retention (closeout/services/history.py)."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import Client

from closeout.models import FinalStanding, GrantStatus, HistoryArchive, HistoryEntry, RewardGrant
from closeout.services import history as history_module
from closeout.services import (
    history_prune,
    reward_grant_status_set,
    reward_tier_create,
    schedule_advance,
    schedule_create,
    season_close,
    season_history_archive,
    seasons_history_due,
)
from leaderboard.models import (
    Board,
    BoardOrder,
    MatchResult,
    PlayerBan,
    ScoringRule,
    TiebreakColumn,
)
from seasons.models import Season, SeasonStatus
from tests.factories import MatchResultFactory, SeasonFactory, board_factory

START = datetime(2026, 10, 1, tzinfo=UTC)
END = START + timedelta(days=7)
AFTER = END + timedelta(hours=1)

pytestmark = pytest.mark.usefixtures("drained_match_results")

COLUMNS = (TiebreakColumn("kills", "desc"), TiebreakColumn("deaths", "asc"))


def reference(season: Season, board: Board) -> list[tuple[int, int, int, int]]:
    """(player, rank, points, total) from the stored results, computed here: the board's rule
    and order, tie-break columns, then the earliest (best) or latest (cumulative) second, then
    the lower player id."""
    rows = MatchResult.objects.filter(board=board, voided_at__isnull=True).exclude(
        player_id__in=PlayerBan.objects.filter(season=season).values("player_id")
    )
    sign = 1 if board.order == BoardOrder.ASC else -1
    orders = [c["order"] for c in board.tiebreak_columns]
    per_player: dict[int, list[MatchResult]] = defaultdict(list)
    for row in rows:
        per_player[row.player_id].append(row)

    def key_of(values: tuple[int, ...]) -> tuple[int, ...]:
        head = (sign * values[0],)
        return head + tuple(
            v if o == "asc" else -v for v, o in zip(values[1:], orders, strict=True)
        )

    ranked = []
    for player, results in per_player.items():
        if board.rule == ScoringRule.CUMULATIVE:
            values = tuple(
                sum(vs)
                for vs in zip(*[(r.points, *(r.tiebreakers or ())) for r in results], strict=False)
            )
            tick = max(int((r.achieved_at - START).total_seconds()) for r in results)
        else:
            best = min(
                results,
                key=lambda r: (
                    key_of((r.points, *(r.tiebreakers or ()))),
                    r.achieved_at,
                ),
            )
            values = (best.points, *(best.tiebreakers or ()))
            tick = int((best.achieved_at - START).total_seconds())
        ranked.append((key_of(values), tick, player, values[0]))
    ranked.sort()
    total = len(ranked)
    return [(player, rank, points, total) for rank, (_, _, player, points) in enumerate(ranked, 1)]


def archived(board: Board) -> list[tuple[int, int, int, int]]:
    return [
        (e.player_id, e.rank, e.points, e.total)
        for e in HistoryEntry.objects.filter(board=board).order_by("rank")
    ]


@pytest.fixture
def closed_season(board_redis, settings) -> Season:
    """A season of four boards (desc best, asc best, cumulative with two tie-break columns,
    best with them), 40 players with many ties, voided results and a ban, closed out with a
    final standings size smaller than the board."""
    settings.FINAL_STANDINGS_SIZE = 5
    season = SeasonFactory.create(starts_at=START, ends_at=END, status=SeasonStatus.ACTIVE)
    boards = [
        Board.objects.get(season=season, slug="main"),
        board_factory(season, "laps", order=BoardOrder.ASC),
        board_factory(season, "kills", rule=ScoringRule.CUMULATIVE, tiebreaks=COLUMNS),
        board_factory(season, "arena", tiebreaks=COLUMNS),
    ]
    draw = random.Random(7)
    for board in boards:
        for _n in range(160):
            MatchResultFactory.create(
                season=season,
                board=board,
                player_id=draw.randrange(1, 41),
                # Coarse points and seconds: ties on points, on every column, and on the tick.
                points=draw.randrange(0, 5) * 100,
                achieved_at=START + timedelta(seconds=draw.randrange(0, 4)),
                tiebreakers=[draw.randrange(0, 3), draw.randrange(0, 3)]
                if board.tiebreaks
                else None,
            )
    MatchResult.objects.filter(season=season, player_id=3).update(voided_at=START)
    PlayerBan.objects.create(season=season, player_id=4, reason="cheating")
    reward_tier_create(season_id=season.id, rank_from=1, rank_to=1, reward_name="crown")
    reward_tier_create(season_id=season.id, rank_from=2, rank_to=5, reward_name="gems", quantity=5)
    assert season_close(season_id=season.id, now=AFTER, force=True).closed
    return season


@pytest.mark.django_db
def test_every_player_of_every_board_is_archived_as_a_reference_ranks_them(
    closed_season: Season,
) -> None:
    assert seasons_history_due(now=AFTER) == [closed_season.id]
    done = season_history_archive(season_id=closed_season.id)
    assert done.boards == 4
    for board in Board.objects.filter(season=closed_season):
        expected = reference(closed_season, board)
        assert len(expected) > 30  # every player, far past the 5 final standings
        assert archived(board) == expected, board.slug
        # The top agrees with the final standings, and the reward with the grant.
        top = [
            (s.player_id, s.rank)
            for s in FinalStanding.objects.filter(board=board).order_by("rank")
        ]
        assert [(p, r) for p, r, _, _ in expected[:5]] == top
        rewards = {
            e.player_id: (e.reward_name, e.reward_quantity)
            for e in HistoryEntry.objects.filter(board=board)
        }
        if board.slug == "main":
            assert rewards[expected[0][0]] == ("crown", 1)
            assert {rewards[p] for p, _, _, _ in expected[1:5]} == {("gems", 5)}
            assert {rewards[p] for p, _, _, _ in expected[5:]} == {(None, None)}
        assert 3 not in rewards
        assert 4 not in rewards
    ends = HistoryEntry.objects.filter(season=closed_season).values_list("season_ends_at")
    assert set(ends) == {(END,)}
    assert seasons_history_due(now=AFTER) == []
    # Again: nothing twice.
    again = season_history_archive(season_id=closed_season.id)
    assert (again.boards, again.rows) == (0, 0)
    assert HistoryEntry.objects.filter(season=closed_season).count() == done.rows


@pytest.mark.django_db
def test_a_crash_between_two_boards_keeps_the_first_and_the_sweep_archives_the_rest(
    closed_season: Season, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = history_module.HistoryArchive.objects.create
    calls = []

    def crash_on_the_second(**kwargs: object) -> HistoryArchive:
        calls.append(kwargs)
        if len(calls) == 2:
            raise RuntimeError("the worker died here")
        return real(**kwargs)

    monkeypatch.setattr(history_module.HistoryArchive.objects, "create", crash_on_the_second)
    with pytest.raises(RuntimeError):
        season_history_archive(season_id=closed_season.id)
    monkeypatch.undo()
    [first] = HistoryArchive.objects.filter(season=closed_season)
    boards = HistoryEntry.objects.filter(season=closed_season).values_list("board", flat=True)
    assert set(boards) == {first.board_id}
    assert seasons_history_due(now=AFTER) == [closed_season.id]
    done = season_history_archive(season_id=closed_season.id)
    assert done.boards == 3
    for board in Board.objects.filter(season=closed_season):
        assert archived(board) == reference(closed_season, board)


@pytest.mark.django_db
def test_only_a_closed_season_is_archived(board_redis) -> None:
    season = SeasonFactory.create(starts_at=START, ends_at=END, status=SeasonStatus.ACTIVE)
    with pytest.raises(ValidationError, match="is active"):
        season_history_archive(season_id=season.id)
    with pytest.raises(ValidationError, match="does not exist"):
        season_history_archive(season_id=987_654)


@pytest.mark.django_db
def test_close_season_archives_the_history(board_redis) -> None:
    season = SeasonFactory.create(starts_at=START, ends_at=END, status=SeasonStatus.ACTIVE)
    for player in (1, 2, 3):
        MatchResultFactory.create(season=season, player_id=player, points=10 * player)
    out = StringIO()
    call_command("close_season", "--season", str(season.id), "--force", stdout=out)
    assert "history: 3 players archived over 1 boards" in out.getvalue()
    assert sorted(HistoryEntry.objects.values_list("player_id", "rank")) == [(1, 3), (2, 2), (3, 1)]


@pytest.mark.django_db
def test_a_revoked_grant_is_no_reward_in_the_history(board_redis) -> None:
    season = SeasonFactory.create(starts_at=START, ends_at=END, status=SeasonStatus.ACTIVE)
    for player in (1, 2, 3):
        MatchResultFactory.create(
            season=season, player_id=player, points=10 * player, achieved_at=START
        )
    reward_tier_create(season_id=season.id, rank_from=1, rank_to=2, reward_name="gems")
    season_close(season_id=season.id, now=AFTER, grace_seconds=0)
    revoked = RewardGrant.objects.get(season=season, player_id=3)
    reward_grant_status_set(grant_id=revoked.id, status=GrantStatus.REVOKED)
    season_history_archive(season_id=season.id)
    assert sorted(HistoryEntry.objects.values_list("player_id", "rank", "reward_name")) == [
        (1, 3, None),
        (2, 2, "gems"),
        (3, 1, None),
    ]


@pytest.mark.django_db
def test_retention_prunes_old_seasons_in_batches_and_leaves_them_out_of_the_sweep(
    closed_season: Season, settings
) -> None:
    season_history_archive(season_id=closed_season.id)
    recent = SeasonFactory.create(starts_at=AFTER, ends_at=AFTER + timedelta(days=7))
    board = Board.objects.get(season=recent, slug="main")
    HistoryEntry.objects.bulk_create(
        HistoryEntry(
            season=recent, board=board, player_id=p, rank=p, points=1, total=5,
            season_ends_at=recent.ends_at,
        )
        for p in range(1, 6)
    )  # fmt: skip
    old_rows = HistoryEntry.objects.filter(season=closed_season).count()
    settings.HISTORY_RETENTION_DAYS = 400
    # 400 days after the first season's end: only it is past the retention.
    now = END + timedelta(days=400, hours=1)
    assert history_prune(now=now, batch=7) == old_rows
    assert not HistoryEntry.objects.filter(season=closed_season).exists()
    assert HistoryEntry.objects.filter(season=recent).count() == 5
    # A closed season past the retention is not archived again by the sweep.
    HistoryArchive.objects.filter(season=closed_season).delete()
    assert seasons_history_due(now=now) == []
    assert seasons_history_due(now=AFTER) == [closed_season.id]


def entry(**kwargs: object) -> HistoryEntry:
    return HistoryEntry(**{"rank": 1, "points": 10, "total": 4, **kwargs})


@pytest.mark.django_db
def test_the_history_api_lists_newest_first_with_filters_and_pages(client: Client) -> None:
    template = SeasonFactory.create(starts_at=START, ends_at=START + timedelta(days=1))
    board_factory(template, "laps", order=BoardOrder.ASC)
    schedule = schedule_create(
        slug="daily-cup",
        name="Daily cup",
        cron="0 0 * * *",
        template_season_id=template.id,
        lead_minutes=0,
        starts_from=START,
    )
    cups = []
    for day in range(3):
        [season_id] = schedule_advance(
            schedule_id=schedule.id, now=START + timedelta(days=day + 1, minutes=1)
        ).created
        cups.append(Season.objects.get(id=season_id))
    # Its id given: the factory's next one may be a schedule's already.
    other = SeasonFactory.create(id=5000, starts_at=START, ends_at=START + timedelta(days=30))
    rows = [
        entry(season=other, board=other.boards.get(), player_id=42, rank=3, total=4,
              season_ends_at=other.ends_at, reward_name="gems", reward_quantity=5),
    ]  # fmt: skip
    for cup in cups:
        for board in cup.boards.all():
            rows.append(
                entry(season=cup, board=board, player_id=42, season_ends_at=cup.ends_at, rank=2)
            )
            rows.append(entry(season=cup, board=board, player_id=43, season_ends_at=cup.ends_at))
    HistoryEntry.objects.bulk_create(rows)

    body = client.get("/api/players/42/history").json()
    assert [(i["seasonId"], i["board"]) for i in body] == [
        (other.id, "main"),
        *[(c.id, slug) for c in reversed(cups) for slug in ("main", "laps")],
    ]
    assert body[0] == {
        "seasonId": other.id,
        "seasonName": other.name,
        "schedule": None,
        "occurrence": None,
        "board": "main",
        "rank": 3,
        "points": 10,
        "percentile": 50.0,
        "total": 4,
        "endsAt": "2026-10-31T00:00:00Z",
        "tier": None,
        "movement": None,
        "reward": {"name": "gems", "quantity": 5},
    }
    assert (body[1]["schedule"], body[1]["occurrence"], body[1]["reward"]) == ("daily-cup", 3, None)
    assert body[1]["percentile"] == 75.0

    cup_only = client.get("/api/players/42/history?schedule=daily-cup&board=laps").json()
    assert [(i["seasonId"], i["board"]) for i in cup_only] == [
        (c.id, "laps") for c in reversed(cups)
    ]
    page = client.get("/api/players/42/history?schedule=daily-cup&limit=2&offset=2").json()
    assert [(i["seasonId"], i["board"]) for i in page] == [
        (cups[1].id, "main"),
        (cups[1].id, "laps"),
    ]
    assert client.get("/api/players/7/history").json() == []

    missing = client.get("/api/players/42/history?schedule=nope")
    assert (missing.status_code, missing.json()) == (
        404,
        {"detail": "schedule 'nope' does not exist"},
    )
    for bad in ("limit=0", "limit=101", "offset=-1", "board=Not%20a%20slug", "schedule=-x"):
        assert client.get(f"/api/players/42/history?{bad}").status_code == 400, bad
    assert client.get("/api/players/0/history").status_code == 400


@pytest.mark.django_db
def test_the_player_card_links_the_history(client: Client, board_redis) -> None:
    from django.utils import timezone

    from players.models import PlayerProfile

    PlayerProfile.objects.create(
        player_id=42,
        display_name="Alice",
        name_updated_at=timezone.now(),
        updated_at=timezone.now(),
    )
    assert client.get("/api/players/42").json()["history"] == "/api/players/42/history"


@pytest.mark.django_db
def test_the_history_page_lists_the_players_seasons(client: Client, closed_season: Season) -> None:
    season_history_archive(season_id=closed_season.id)
    main = Board.objects.get(season=closed_season, slug="main")
    winner = HistoryEntry.objects.get(board=main, rank=1)
    page = client.get(f"/players/{winner.player_id}/history").content.decode()
    assert f"<td>main</td><td>1</td><td>{winner.total}</td><td>{winner.points}</td>" in page
    assert "1 &times; crown" in page
    assert "No closed season yet." in client.get("/players/999/history").content.decode()
    assert client.get("/players/1/history?page=0").status_code == 400
