"""The boards migrations on a populated database: nothing lost, and every answer of the read API
what the data meant before boards existed.

The database goes back to the state before the rewards and MatchResult moves and before boards
(seasons 0003, ingestion 0006, leaderboard 0003, no closeout), is filled through the historical
models (a best and a cumulative season at different time resolutions, a closed season with its
final standings and grants, a season without results, a voided result, a banned player, ties,
rebuild and reconcile runs, staff permissions on the models that change app), and migrates
forward to the latest state. Then: one ``main`` board per season carrying the season's old rule,
time resolution and codec split; every row on it; the moved models' content types and
permissions kept; and, once the boards are rebuilt from PostgreSQL, every read (top, player,
around, ranks, friends, daily and weekly top, seasons, standings) equal to a reference computed
here from the inserted rows with the pre-board semantics (best: highest points, earliest tick;
cumulative: sum at the latest tick; identical scores share a rank, listed by member bytes
descending as Redis orders them).

The database is left at the latest migration, whatever happens (the rest of the suite needs it).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from random import Random
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from rest_framework import serializers

from closeout.models import FinalStanding, RewardGrant, RewardTier
from leaderboard.codec import ScoreCodec
from leaderboard.models import Board, MatchResult, RebuildRun, ReconcileRun
from leaderboard.selectors.boards import BoardRef
from leaderboard.selectors.top import top_snapshot_memo_clear
from leaderboard.services import board_all_rebuild
from seasons.memo import process_memos_clear
from seasons.selectors import SeasonRef
from tests.helpers import expected_board, mark_intact
from tests.migrations import historical_apps, migrate_to_latest

pytestmark = pytest.mark.django_db(transaction=True)

# The state before the rewards/MatchResult moves (0004s) and before boards (0005s).
BEFORE = [
    ("seasons", "0003_season_drain_end_offsets"),
    ("ingestion", "0006_match_result_season_checked_per_batch"),
    ("leaderboard", "0003_rebuild_run_overflowed_players"),
]
BEFORE_TARGETS: list[tuple[str, str | None]] = [*BEFORE, ("closeout", None)]

# Models that change app in the 0004 migrations: (old app, new app, model).
MOVED = [
    ("seasons", "closeout", "rewardtier"),
    ("seasons", "closeout", "finalstanding"),
    ("seasons", "closeout", "rewardgrant"),
    ("ingestion", "leaderboard", "matchresult"),
]

NOW = datetime.now(UTC).replace(microsecond=0)
BEST, CUMULATIVE, CLOSED, EMPTY = 7101, 7102, 7103, 7104
BANNED_PLAYER = 13
ABSENT_PLAYER = 999


@pytest.fixture
def old_apps() -> Iterator[Any]:
    """The historical apps before boards; the database goes back to the latest state after."""
    with historical_apps(BEFORE_TARGETS) as apps:
        yield apps


# --- the old data ----------------------------------------------------------------------------


SEASONS = {
    # id: (rule, time resolution, status, starts (days from now), ends (days from now))
    BEST: ("best", 1, "active", -20, 40),
    CUMULATIVE: ("cumulative", 60, "active", -12, 80),
    CLOSED: ("best", 5, "closed", -60, -30),
    EMPTY: ("best", 1, "scheduled", 5, 95),
}


def _results_for(season_id: int, starts_at: datetime, ends_at: datetime) -> list[SimpleNamespace]:
    """Deterministic results over the season's past days: ties on points, several days and
    ISO weeks, players with one result and players with many."""
    random = Random(season_id)
    last = min(ends_at, NOW) - starts_at
    span = int(last.total_seconds()) - 1
    rows = []
    for _ in range(160):
        rows.append(
            SimpleNamespace(
                season_id=season_id,
                match_id=uuid.UUID(int=random.getrandbits(128), version=4),
                player_id=random.randrange(1, 41),
                points=random.randrange(0, 20) * 50,
                achieved_at=starts_at + timedelta(seconds=random.randrange(span)),
                voided_at=None,
            )
        )
    # Identical scores: the same points in the same second (and so the same tick).
    moment = starts_at + timedelta(days=2, seconds=7)
    for player in (21, 3):
        rows.append(
            SimpleNamespace(
                season_id=season_id,
                match_id=uuid.uuid4(),
                player_id=player,
                points=5000,
                achieved_at=moment,
                voided_at=None,
            )
        )
    # Equal points 20 s apart in one minute: one tick at a minute's resolution (a shared rank),
    # two ticks at a second's (so a resolution copied wrong changes the answers).
    for player, seconds in ((41, 0), (42, 20)):
        rows.append(
            SimpleNamespace(
                season_id=season_id,
                match_id=uuid.uuid4(),
                player_id=player,
                points=7000,
                achieved_at=starts_at + timedelta(days=4, seconds=seconds),
                voided_at=None,
            )
        )
    # The best result of all, voided: it counts nowhere.
    rows.append(
        SimpleNamespace(
            season_id=season_id,
            match_id=uuid.uuid4(),
            player_id=7,
            points=90_000,
            achieved_at=starts_at + timedelta(days=1),
            voided_at=starts_at + timedelta(days=1, hours=1),
        )
    )
    # The banned player's results would lead the board.
    rows.append(
        SimpleNamespace(
            season_id=season_id,
            match_id=uuid.uuid4(),
            player_id=BANNED_PLAYER,
            points=80_000,
            achieved_at=starts_at + timedelta(days=3),
            voided_at=None,
        )
    )
    return rows


def _populate(apps: Any) -> dict[str, Any]:
    season_model = apps.get_model("seasons", "Season")
    result_model = apps.get_model("ingestion", "MatchResult")
    tier_model = apps.get_model("seasons", "RewardTier")
    standing_model = apps.get_model("seasons", "FinalStanding")
    grant_model = apps.get_model("seasons", "RewardGrant")
    ban_model = apps.get_model("leaderboard", "PlayerBan")
    rebuild_model = apps.get_model("leaderboard", "RebuildRun")
    reconcile_model = apps.get_model("leaderboard", "ReconcileRun")

    seasons: dict[int, Any] = {}
    results: dict[int, list[SimpleNamespace]] = {}
    for season_id, (rule, resolution, status, start, end) in SEASONS.items():
        starts_at, ends_at = NOW + timedelta(days=start), NOW + timedelta(days=end)
        seasons[season_id] = season_model.objects.create(
            id=season_id,
            name=f"Season {season_id}",
            starts_at=starts_at,
            ends_at=ends_at,
            status=status,
            rule=rule,
            time_resolution_seconds=resolution,
            # What Season.save() computed before boards.
            time_bits=ScoreCodec.time_bits_for(
                duration=ends_at - starts_at, resolution_seconds=resolution
            ),
            closed_at=ends_at + timedelta(hours=1) if status == "closed" else None,
        )
        if status == "scheduled":
            continue
        results[season_id] = rows = _results_for(season_id, starts_at, ends_at)
        result_model.objects.bulk_create(
            [
                result_model(
                    season_id=season_id,
                    match_id=r.match_id,
                    player_id=r.player_id,
                    points=r.points,
                    achieved_at=r.achieved_at,
                    voided_at=r.voided_at,
                    void_reason="cheat report" if r.voided_at else "",
                    kafka_partition=n % 4,
                    kafka_offset=n // 4,
                    # Rows from before ingest_xid existed have none.
                    ingest_xid=None if n % 10 == 0 else 1000 + n,
                )
                for n, r in enumerate(rows)
            ]
        )
        ban_model.objects.create(season_id=season_id, player_id=BANNED_PLAYER, reason="cheating")
        rebuild_model.objects.create(
            season_id=season_id, status="succeeded", members=40, finished_at=NOW
        )
        rebuild_model.objects.create(
            season_id=season_id,
            day=starts_at.date(),
            status="failed",
            error="network:TimeoutError",
            finished_at=NOW,
        )
        reconcile_model.objects.create(
            season_id=season_id,
            redis_members=40,
            expected_members=40,
            sample_size=40,
            mismatched_scores=0,
            drift_found=False,
        )
        tiers = [
            tier_model.objects.create(
                season_id=season_id, rank_from=1, rank_to=1, reward_name="Crown", quantity=1
            ),
            tier_model.objects.create(
                season_id=season_id, rank_from=2, rank_to=10, reward_name="Gems", quantity=500
            ),
        ]
        if status == "closed":
            codec = _old_codec(seasons[season_id])
            scores = expected_board(_old_ref(seasons[season_id]), rows, banned=[BANNED_PLAYER])
            # The close-out's ranks: encoded score, then the lower player id (distinct ranks).
            ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:25]
            for rank, (player, score) in enumerate(ranked, start=1):
                decoded = codec.decode(score)
                standing_model.objects.create(
                    season_id=season_id,
                    rank=rank,
                    player_id=player,
                    points=decoded.points,
                    reached_at=starts_at + decoded.elapsed,
                )
                tier = tiers[0] if rank == 1 else tiers[1] if rank <= 10 else None
                if tier is not None:
                    grant_model.objects.create(
                        season_id=season_id,
                        tier_id=tier.id,
                        player_id=player,
                        rank=rank,
                        reward_name=tier.reward_name,
                        quantity=tier.quantity,
                        status="delivered" if rank == 1 else "pending",
                    )
    return {"seasons": seasons, "results": results}


def _old_codec(season: Any) -> ScoreCodec:
    """The codec a season had before boards (Season.codec: 53 bits split by time_bits)."""
    return ScoreCodec(
        points_bits=53 - season.time_bits,
        time_bits=season.time_bits,
        resolution_seconds=season.time_resolution_seconds,
    )


def _old_ref(season: Any, board_id: int = 0) -> BoardRef:
    """The pre-board season as the reference's board: descending, the season's rule and codec
    (not read back from the migrated board, so a wrong copy shows)."""
    return BoardRef(
        id=board_id,
        slug="main",
        name="Main",
        order="desc",
        rule=season.rule,
        codec=_old_codec(season),
        season=SeasonRef(
            id=season.id,
            name=season.name,
            status=season.status,
            starts_at=season.starts_at,
            ends_at=season.ends_at,
        ),
    )


def _staff_permissions() -> dict[str, Any]:
    """Content types and permissions of the models about to move, as an old database has them,
    held by a group and a user."""
    kept: dict[str, Any] = {"content_types": {}, "permissions": {}}
    group = Group.objects.create(name="season stewards")
    user = User.objects.create_user("steward", password="x", is_staff=True)
    for old_app, _, model in MOVED:
        content_type, _ = ContentType.objects.get_or_create(app_label=old_app, model=model)
        kept["content_types"][model] = content_type.id
        for action in ("add", "change", "delete", "view"):
            permission, _ = Permission.objects.get_or_create(
                content_type=content_type,
                codename=f"{action}_{model}",
                defaults={"name": f"Can {action} {model}"},
            )
            kept["permissions"][f"{action}_{model}"] = permission.id
        group.permissions.add(kept["permissions"][f"change_{model}"])
        user.user_permissions.add(kept["permissions"][f"view_{model}"])
    user.groups.add(group)
    return kept


# --- the reference ----------------------------------------------------------------------------


def _entries(scores: dict[int, int], codec: ScoreCodec) -> list[dict[str, Any]]:
    """A board's entries in Redis's order (score descending, then member bytes descending),
    with competition ranks (identical scores share one)."""
    ordered = sorted(scores.items(), key=lambda kv: (kv[1], str(kv[0])), reverse=True)
    return [
        {
            "rank": 1 + sum(1 for other in scores.values() if other > score),
            "playerId": player,
            "points": codec.decode(score).points,
            # No profiles in these boards.
            "displayName": None,
            "country": None,
        }
        for player, score in ordered
    ]


def _player(scores: dict[int, int], codec: ScoreCodec, player: int) -> dict[str, Any]:
    score = scores[player]
    rank = 1 + sum(1 for other in scores.values() if other > score)
    total = len(scores)
    points = codec.decode(score).points
    above = [other for other in scores.values() if other > score]
    return {
        "rank": rank,
        "playerId": player,
        "points": points,
        "displayName": None,
        "country": None,
        "total": total,
        "percentile": round((total - rank + 1) * 100 / total, 2),
        "pointsToNextRank": codec.decode(min(above)).points - points + 1 if above else None,
    }


def _iso_week(moment: datetime) -> str:
    year, week, _ = moment.astimezone(UTC).isocalendar()
    return f"{year}-W{week:02d}"


_DATETIME = serializers.DateTimeField()


# --- the test ---------------------------------------------------------------------------------


def test_boards_migration_keeps_every_row_and_every_answer_of_the_read_api(old_apps, client):
    data = _populate(old_apps)
    staff = _staff_permissions()
    old_seasons = data["seasons"]
    counts_before = {
        table: _count(table)
        for table in (
            "ingestion_matchresult",
            "seasons_rewardtier",
            "seasons_finalstanding",
            "seasons_rewardgrant",
            "leaderboard_playerban",
            "leaderboard_rebuildrun",
            "leaderboard_reconcilerun",
        )
    }
    grants_before = _rows("SELECT id, tier_id, player_id, rank, status FROM seasons_rewardgrant")

    migrate_to_latest()
    process_memos_clear()
    top_snapshot_memo_clear()

    # --- one main board per season, with the season's old scoring -----------------------------
    boards = {board.season_id: board for board in Board.objects.all()}
    assert Board.objects.count() == len(SEASONS)
    for season_id, old in old_seasons.items():
        board = boards[season_id]
        assert (board.slug, board.order, board.rule) == ("main", "desc", old.rule)
        assert board.time_resolution_seconds == old.time_resolution_seconds
        assert board.time_bits == old.time_bits
        assert board.codec == _old_codec(old)
        # Contract 0.3's metadata: an existing board keeps none, so its answers stay as they
        # were (no metadata field on its entries).
        assert board.keeps_metadata is False
        # And its tie-break columns: none, so it ranks by points (and time) as before.
        assert board.tiebreak_columns == []
        assert board.wide_codec is None

    # --- every row kept, on its season's main board --------------------------------------------
    assert {table: _count(table) for table in counts_before} == counts_before
    assert not MatchResult.objects.filter(metadata__isnull=False).exists()
    assert not FinalStanding.objects.filter(metadata__isnull=False).exists()
    assert not MatchResult.objects.filter(tiebreakers__isnull=False).exists()
    assert not FinalStanding.objects.filter(tiebreakers__isnull=False).exists()
    for moved in (MatchResult, RewardTier, FinalStanding, RewardGrant, RebuildRun, ReconcileRun):
        rows = list(moved.objects.values_list("season_id", "board_id"))
        assert rows, moved
        assert all(board_id == boards[season_id].id for season_id, board_id in rows), moved
    for season_id, rows in data["results"].items():
        stored = set(
            MatchResult.objects.filter(season_id=season_id).values_list(
                "match_id", "player_id", "points", "achieved_at", "voided_at"
            )
        )
        assert stored == {
            (r.match_id, r.player_id, r.points, r.achieved_at, r.voided_at) for r in rows
        }
    assert _rows("SELECT id, tier_id, player_id, rank, status FROM seasons_rewardgrant") == (
        grants_before
    )
    constraints = connection.introspection.get_constraints(
        connection.cursor(), "ingestion_matchresult"
    )
    assert constraints["match_result_match_player_board_uniq"]["columns"] == [
        "match_id",
        "player_id",
        "board_id",
    ]
    assert "match_result_board_player_idx" in constraints
    assert "match_result_match_player_uniq" not in constraints

    # --- content types and permissions of the moved models -------------------------------------
    for old_app, new_app, model in MOVED:
        content_type = ContentType.objects.get(pk=staff["content_types"][model])
        assert (content_type.app_label, content_type.model) == (new_app, model)
        assert not ContentType.objects.filter(app_label=old_app, model=model).exists()
        for action in ("add", "change", "delete", "view"):
            permission = Permission.objects.get(pk=staff["permissions"][f"{action}_{model}"])
            assert permission.content_type_id == content_type.id
    steward = User.objects.get(username="steward")
    for _, new_app, model in MOVED:
        assert steward.has_perm(f"{new_app}.change_{model}")
        assert steward.has_perm(f"{new_app}.view_{model}")
        assert not steward.has_perm(f"{new_app}.delete_{model}")

    # --- the read API, after rebuilding the boards from PostgreSQL ----------------------------
    for season_id in data["results"]:
        if old_seasons[season_id].status != "closed":  # a closed season's boards left Redis
            board_all_rebuild(board_id=boards[season_id].id, all_days=True)
    # Rebuilt whole from PostgreSQL (or nothing to hold): intact, as a recovery marks them.
    for season_id in boards:
        mark_intact(season_id)

    for season_id, rows in data["results"].items():
        if old_seasons[season_id].status == "closed":
            continue
        _assert_reads(client, old_seasons[season_id], boards[season_id].id, rows)

    # The season without results: an empty board.
    for prefix in _prefixes(EMPTY):
        assert _get(client, f"{prefix}/top") == []
        assert _get(client, f"{prefix}/players/1", status=404)

    # Seasons list: the old fields, the rule of each season.
    assert _get(client, "/api/seasons") == [
        {
            "id": old.id,
            "name": old.name,
            "status": old.status,
            "startsAt": _DATETIME.to_representation(old.starts_at),
            "endsAt": _DATETIME.to_representation(old.ends_at),
            "rule": old.rule,
            # Added since (recurring competitions): null for every season made by hand.
            "schedule": None,
            "occurrence": None,
        }
        for old in sorted(old_seasons.values(), key=lambda s: (s.starts_at, s.id), reverse=True)
    ]

    # Standings: the closed season's stored entries, unchanged; they are also what the board's
    # aggregation gives now (the old close-out's ranks).
    closed = old_seasons[CLOSED]
    scores = expected_board(_old_ref(closed), data["results"][CLOSED], banned=[BANNED_PLAYER])
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:25]
    codec = _old_codec(closed)
    expected_standings = {
        "seasonId": CLOSED,
        "entries": [
            {
                "rank": rank,
                "playerId": player,
                "points": codec.decode(score).points,
                "displayName": None,
                "country": None,
                "reachedAt": _DATETIME.to_representation(
                    closed.starts_at + codec.decode(score).elapsed
                ),
            }
            for rank, (player, score) in enumerate(ranked, start=1)
        ],
    }
    for path in (
        f"/api/seasons/{CLOSED}/standings",
        f"/api/seasons/{CLOSED}/boards/main/standings",
    ):
        assert _get(client, path) == expected_standings
    assert _get(client, f"/api/seasons/{BEST}/standings", status=404)


def _prefixes(season_id: int) -> list[str]:
    return [f"/api/seasons/{season_id}/leaderboard", f"/api/seasons/{season_id}/boards/main"]


def _assert_reads(client, old: Any, board_id: int, rows: list[SimpleNamespace]) -> None:
    ref = _old_ref(old, board_id)
    codec = ref.codec
    scores = expected_board(ref, rows, banned=[BANNED_PLAYER])
    entries = _entries(scores, codec)
    assert len(entries) > 20
    assert BANNED_PLAYER not in scores
    # The voided 90,000 counts nowhere; the identical scores share a rank.
    assert max(entry["points"] for entry in entries) < 90_000
    tied = [e["rank"] for e in entries if e["playerId"] in (21, 3)]
    if old.rule == "best":
        assert tied[0] == tied[1]
    same_minute = [e["rank"] for e in entries if e["playerId"] in (41, 42)]
    assert (same_minute[0] == same_minute[1]) == (old.time_resolution_seconds >= 60)
    players = [entry["playerId"] for entry in entries]

    for prefix in _prefixes(old.id):
        assert _get(client, f"{prefix}/top?limit=1000") == entries
        assert _get(client, f"{prefix}/top?limit=3") == entries[:3]
        for player in players:
            assert _get(client, f"{prefix}/players/{player}") == _player(scores, codec, player)
        for player in (BANNED_PLAYER, ABSENT_PLAYER):
            assert _get(client, f"{prefix}/players/{player}", status=404)
            assert _get(client, f"{prefix}/players/{player}/around?radius=2") == []
        for player in (players[0], players[1], players[len(players) // 2], players[-1]):
            position = players.index(player)
            for radius in (0, 2, 5):
                window = entries[max(0, position - radius) : position + radius + 1]
                assert _get(client, f"{prefix}/players/{player}/around?radius={radius}") == window
        for start, count in ((1, 5), (4, 7), (len(entries) - 2, 10), (len(entries) + 5, 3)):
            assert (
                _get(client, f"{prefix}/ranks?start={start}&count={count}")
                == (entries[start - 1 : start - 1 + count])
            )
        friends = [players[-1], BANNED_PLAYER, players[0], ABSENT_PLAYER, 21, 3, players[5]]
        wanted = set(friends)
        assert _get(client, f"{prefix}/friends?ids={','.join(map(str, friends))}") == [
            entry for entry in entries if entry["playerId"] in wanted
        ]

        days = sorted({r.achieved_at.astimezone(UTC).date() for r in rows})
        for day in days:
            daily = expected_board(ref, rows, day=day, banned=[BANNED_PLAYER])
            assert _get(client, f"{prefix}/daily/{day.isoformat()}/top?limit=1000") == (
                _entries(daily, codec)
            ), day
        quiet = _a_day_without_results(old.starts_at, days)
        assert _get(client, f"{prefix}/daily/{quiet.isoformat()}/top") == []

        weeks = sorted({_iso_week(r.achieved_at) for r in rows})
        assert len(weeks) >= 2
        for week in weeks:
            of_week = [r for r in rows if _iso_week(r.achieved_at) == week]
            weekly = expected_board(ref, of_week, banned=[BANNED_PLAYER])
            assert _get(client, f"{prefix}/weekly/{week}/top?limit=1000") == (
                _entries(weekly, codec)
            ), week


def _a_day_without_results(starts_at: datetime, days: list[date]) -> date:
    day = starts_at.date() - timedelta(days=1)
    assert day not in days
    return day


def _get(client, url: str, status: int = 200) -> Any:
    response = client.get(url)
    assert response.status_code == status, (url, response.content)
    return response.json()


def _count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608 (fixed table names)
        return int(cursor.fetchone()[0])


def _rows(sql: str) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql + " ORDER BY 1")
        return list(cursor.fetchall())
