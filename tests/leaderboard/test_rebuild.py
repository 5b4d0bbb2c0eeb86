from __future__ import annotations

import random
import threading
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from leaderboard import keys
from leaderboard.models import (
    BoardOrder,
    MatchResult,
    RebuildRun,
    RunStatus,
    ScoringRule,
    TiebreakColumn,
)
from leaderboard.selectors.boards import BoardRef
from leaderboard.services import (
    PHASE_ACTIVATED,
    PHASE_LOADED,
    PHASE_MERGED,
    PHASE_PENDING,
    REBUILD_DONE_TTL_SECONDS,
    RebuildInProgressError,
    SeasonClosedError,
    board_rebuild,
    daily_board_expire_at,
)
from leaderboard.services.rebuild import (
    DELTA_MERGE_BATCH,
    _board_keys,
    _merge_delta,
    spec_args,
)
from seasons.models import Season, SeasonStatus
from tests.factories import MatchResultFactory, board_factory
from tests.helpers import as_board, board_read, expected_board, main_board_id, make_season
from tests.leaderboard import live

pytestmark = pytest.mark.django_db(transaction=True)

RULES = [ScoringRule.BEST, ScoringRule.CUMULATIVE]


def _at(season, rng):
    return season.starts_at + timedelta(
        days=rng.randint(0, 2),
        seconds=rng.randint(0, 86399),
        microseconds=rng.randint(0, 10**6 - 1),
    )


def _ingest_many(board_redis, season, n, *, players=25, seed=1):
    rng = random.Random(seed)
    return [
        live.ingest(
            board_redis,
            season,
            player_id=rng.randint(1, players),
            points=rng.choice([0, 5, 10, 25]),
            at=_at(season, rng),
        )
        for _ in range(n)
    ]


def _in_other_thread(fn):
    """Run ORM work on another connection (the caller may be inside the rebuild's snapshot)."""
    errors = []

    def run():
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if errors:
        raise errors[0]


@pytest.mark.parametrize("rule", RULES)
def test_rebuild_equals_the_board_live_ingestion_built(board_redis, rule):
    season = make_season(rule=rule)
    results = _ingest_many(board_redis, season, 150)
    season_key = keys.board(board_id=main_board_id(season.id))
    day = season.starts_at.date() + timedelta(days=1)
    day_key = keys.daily_board(board_id=main_board_id(season.id), day=day)
    live_season, live_day = board_read(board_redis, season_key), board_read(board_redis, day_key)
    assert live_season == expected_board(season, results)
    assert live_day == expected_board(season, results, day=day)

    board_redis.delete(season_key)
    board_redis.zadd(day_key, {"999": 1})  # drift the daily board
    assert board_rebuild(board_id=main_board_id(season.id)).members == len(live_season)
    board_rebuild(board_id=main_board_id(season.id), day=day)

    assert board_read(board_redis, season_key) == live_season
    assert board_read(board_redis, day_key) == live_day
    # Only the finished rebuilds' snapshots stay, for a while (the next test says why).
    leftovers = {k.decode() for k in board_redis.scan_iter(match=f"{season_key}*rebuild*")}
    assert leftovers == {
        keys.rebuild_done(board_key=season_key),
        keys.rebuild_done(board_key=day_key),
    }
    assert 0 < board_redis.ttl(keys.rebuild_done(board_key=season_key)) <= REBUILD_DONE_TTL_SECONDS


@pytest.mark.parametrize("rule", RULES)
def test_a_result_stored_before_the_snapshot_and_applied_after_the_rebuild_counts_once(
    board_redis, rule
):
    """A consumer held up between its PostgreSQL commit and its Redis write (Redis was down,
    it retries) applies its batch after a recovery rebuilt the board from a snapshot that
    already counts it: the board must not count it twice (a cumulative sum would)."""
    season = make_season(rule=rule)
    board_id = main_board_id(season.id)
    first = live.ingest(board_redis, season, player_id=1, points=10, at=season.starts_at)
    held_up, held_xid = live.store(season, player_id=1, points=7, at=season.starts_at)
    day = first.achieved_at.date()
    board_rebuild(board_id=board_id)
    board_rebuild(board_id=board_id, day=day)

    live.apply(board_redis, season, held_up, held_xid)  # the late write of a counted result
    after, after_xid = live.store(season, player_id=1, points=4, at=season.starts_at)
    live.apply(board_redis, season, after, after_xid)  # stored after the snapshots: it counts

    results = [first, held_up, after]
    assert board_read(board_redis, keys.board(board_id=board_id)) == expected_board(season, results)
    assert board_read(board_redis, keys.daily_board(board_id=board_id, day=day)) == expected_board(
        season, results, day=day
    )


def test_a_daily_board_keeps_its_expiry_and_a_recreated_one_gets_the_default(board_redis):
    season = make_season()
    r = live.ingest(board_redis, season, player_id=1, points=5, at=season.starts_at)
    day = r.achieved_at.date()
    day_key = keys.daily_board(board_id=main_board_id(season.id), day=day)
    board_redis.expire(day_key, 5000)
    board_rebuild(board_id=main_board_id(season.id), day=day)
    assert 4900 < board_redis.ttl(day_key) <= 5000
    board_redis.delete(day_key)
    board_rebuild(board_id=main_board_id(season.id), day=day)
    now = timezone.now()
    expected_ttl = daily_board_expire_at(day=day, now=now) - int(now.timestamp())
    assert expected_ttl - 5 < board_redis.ttl(day_key) <= expected_ttl
    assert board_redis.ttl(keys.board(board_id=main_board_id(season.id))) == -1


def test_a_board_with_no_counted_results_is_removed(board_redis):
    season = make_season()
    r = live.ingest(board_redis, season, player_id=1, points=5, at=season.starts_at)
    MatchResult.objects.filter(pk=r.pk).delete()
    assert board_rebuild(board_id=main_board_id(season.id)).members == 0
    assert not board_redis.exists(keys.board(board_id=main_board_id(season.id)))


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize(
    "phase", [PHASE_PENDING, PHASE_ACTIVATED, "loading", PHASE_LOADED, PHASE_MERGED]
)
def test_results_ingested_during_a_rebuild_survive_it(board_redis, rule, phase):
    season = make_season(rule=rule)
    results = _ingest_many(board_redis, season, 60, players=10)
    rng = random.Random(5)
    during: list[MatchResult] = []

    def ingest_some():
        # An existing player (cumulative: must add exactly once) and a new one.
        for player in (1, 2, 50 + len(during)):
            during.append(
                live.ingest(
                    board_redis,
                    season,
                    player_id=player,
                    points=rng.choice([5, 30]),
                    at=_at(season, rng),
                )
            )

    fired: list[str] = []

    def on_phase(name):
        if name == phase and not fired:
            fired.append(name)
            _in_other_thread(ingest_some)

    def progress(_members):
        on_phase("loading")

    board_rebuild(board_id=main_board_id(season.id), on_phase=on_phase, progress=progress)
    assert fired == [phase]
    # Results applied after the rebuild land on the new board as usual.
    ingest_some()
    everything = results + during
    assert board_read(board_redis, keys.board(board_id=main_board_id(season.id))) == expected_board(
        season, everything
    )


@pytest.mark.parametrize("rule", RULES)
def test_a_result_committed_after_the_snapshot_began_is_kept_once(board_redis, rule, settings):
    """Its transaction was running when the snapshot was taken: invisible to the aggregation,
    though its xid is below the snapshot's xmax; the apply must route it to the delta."""
    season = make_season(rule=rule)
    results = _ingest_many(board_redis, season, 30, players=5)
    db = settings.DATABASES["default"]
    conn = psycopg.connect(
        host=db["HOST"],
        port=db["PORT"],
        user=db["USER"],
        password=db["PASSWORD"],
        dbname=connection.settings_dict["NAME"],
    )
    state = {}

    def on_phase(name):
        if name == PHASE_PENDING:
            with conn.cursor() as cur:
                cur.execute(
                    f"INSERT INTO {MatchResult._meta.db_table} (match_id, player_id, season_id, "  # noqa: S608
                    "board_id, points, achieved_at, ingested_at, void_reason) VALUES "
                    "(gen_random_uuid(), 1, "
                    "%s, %s, 40, %s, now(), '') RETURNING id, pg_current_xact_id()::text::bigint",
                    [season.id, main_board_id(season), season.starts_at + timedelta(days=3)],
                )
                row = cur.fetchone()
                assert row is not None
                state["id"], state["xid"] = row
            # A later transaction commits first, so the snapshot's xmax is past the open one.
            _in_other_thread(
                lambda: results.append(
                    live.ingest(board_redis, season, player_id=2, points=7, at=season.starts_at)
                )
            )
        if name == PHASE_ACTIVATED:
            snap = board_redis.get(
                keys.rebuild_marker(board_key=keys.board(board_id=main_board_id(season.id)))
            )
            xip = snap.decode().split(":")[2]
            assert str(state["xid"]) in xip.split(",")
            conn.commit()

            def apply_late():
                late = MatchResult.objects.get(pk=state["id"])
                live.apply(board_redis, season, late, state["xid"])
                results.append(late)

            # This callback runs inside the rebuild's snapshot, which cannot see the row.
            _in_other_thread(apply_late)

    try:
        board_rebuild(board_id=main_board_id(season.id), on_phase=on_phase)
    finally:
        conn.close()
    assert board_read(board_redis, keys.board(board_id=main_board_id(season.id))) == expected_board(
        season, results
    )


def test_readers_never_see_an_empty_or_partial_board(board_redis):
    season = make_season(rule=ScoringRule.CUMULATIVE)
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {MatchResult._meta.db_table} (match_id, player_id, season_id, board_id,"  # noqa: S608
            " points, achieved_at, ingested_at, void_reason)"
            " SELECT gen_random_uuid(), g, %s, %s, g %% 1000, %s, now(), ''"
            " FROM generate_series(1, 30000) g",
            [season.id, main_board_id(season), season.starts_at + timedelta(hours=1)],
        )
    key = keys.board(board_id=main_board_id(season.id))
    board_rebuild(board_id=main_board_id(season.id))
    assert board_redis.zcard(key) == 30000
    sizes = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            sizes.append(board_redis.zcard(key))

    t = threading.Thread(target=reader)
    t.start()
    try:
        board_rebuild(board_id=main_board_id(season.id), zadd_batch=100)
    finally:
        stop.set()
        t.join()
    assert len(sizes) > 10
    assert set(sizes) == {30000}


def test_a_second_rebuild_of_the_same_board_is_refused(board_redis):
    season = make_season()
    live.ingest(board_redis, season, player_id=1, points=5, at=season.starts_at)

    def on_phase(name):
        if name == PHASE_LOADED:
            with pytest.raises(RebuildInProgressError):
                board_rebuild(board_id=main_board_id(season.id))

    board_rebuild(board_id=main_board_id(season.id), on_phase=on_phase)
    board_rebuild(board_id=main_board_id(season.id))
    assert board_read(board_redis, keys.board(board_id=main_board_id(season.id))) == {
        1: as_board(season).codec.encode(points=5, elapsed_ticks=0)
    }


@pytest.mark.parametrize("columns", [0, 2], ids=["plain", "tie-break"])
def test_a_season_closed_during_a_rebuild_leaves_no_board_behind(board_redis, columns):
    """A rebuild checked the season before the close-out committed and began while the
    close-out's SCAN walked the board's keys: the scan saw the live board but not the rebuild's
    marker, made after it passed (SCAN promises only keys present throughout). The finish,
    finding its marker, would have renamed the board back for good."""
    season = make_season()
    board = board_factory(
        season,
        slug="cup",
        tiebreaks=[TiebreakColumn(f"c{i}", BoardOrder.DESC) for i in range(columns)],
    )
    MatchResultFactory.create(
        on_board=board, player_id=1, points=5, tiebreakers=[1] * columns if columns else None
    )
    live_key = keys.board(board_id=board.id)

    def on_phase(name):
        if name == PHASE_MERGED:
            Season.objects.filter(pk=season.id).update(status=SeasonStatus.CLOSED)
            seen = [
                key
                for key in board_redis.scan_iter(match=keys.board_pattern(board_id=board.id))
                if not key.decode().startswith(keys.rebuild_temp(board_key=live_key))
            ]
            board_redis.unlink(*seen)

    with pytest.raises(SeasonClosedError):
        board_rebuild(board_id=board.id, on_phase=on_phase)
    assert not board_redis.exists(live_key, keys.board_index(board_key=live_key))
    # The rebuild's own keys are gone too, but for its snapshot's, which expires.
    left = {
        key.decode() for key in board_redis.scan_iter(match=keys.board_pattern(board_id=board.id))
    }
    assert left <= {keys.rebuild_done(board_key=live_key)}
    assert all(board_redis.ttl(key) > 0 for key in left)
    run = RebuildRun.objects.get(board_id=board.id)
    assert run.status == RunStatus.FAILED


def test_a_failed_rebuild_leaves_the_live_board_and_no_marker(board_redis):
    season = make_season()
    live.ingest(board_redis, season, player_id=1, points=5, at=season.starts_at)
    key = keys.board(board_id=main_board_id(season.id))
    before = board_read(board_redis, key)

    def on_phase(name):
        if name == PHASE_LOADED:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        board_rebuild(board_id=main_board_id(season.id), on_phase=on_phase)
    assert board_read(board_redis, key) == before
    assert list(board_redis.scan_iter(match=f"{key}*rebuild*")) == []


def test_a_large_delta_of_a_tie_break_board_is_merged_in_short_calls(board_redis):
    """The delta's merge walks the hash with one HSCAN cursor across its calls: restarted at 0,
    each call walked the buckets the earlier ones emptied and past 10,000 of them returned
    nothing, so the merge stopped progressing and the finish merged the rest in one call."""
    season = make_season()
    board = BoardRef.from_model(
        board_factory(season, "wide", tiebreaks=(TiebreakColumn("kills", "desc"),))
    )
    wide = board.wide_codec
    assert wide is not None
    k = _board_keys(board_id=board.id, day=None)
    players = 40_000
    pipe = board_redis.pipeline(transaction=False)
    for start in range(1, players + 1, 5_000):
        pipe.hset(
            k.delta,
            mapping={
                str(p): wide.encode(points=p, tiebreakers=(p % 7,), elapsed_ticks=p)
                for p in range(start, min(start + 5_000, players + 1))
            },
        )
    pipe.execute()
    _, left_off = _merge_delta(board_redis, k, spec_args(board), wide=True)
    assert left_off == []
    # What is left for the finish is one call's share at most, not most of the delta.
    assert board_redis.hlen(k.delta) <= DELTA_MERGE_BATCH
    assert board_redis.zcard(k.temp) + board_redis.hlen(k.delta) == players


@pytest.mark.parametrize("order", [BoardOrder.DESC, BoardOrder.ASC])
def test_latest_keeps_a_later_result_applied_before_an_older_one(board_redis, order) -> None:
    """One player's results on two partitions: the older was decided the latest before the
    newer was stored, and its apply comes after the newer's (a Redis retry, a slow consumer).
    The board and the day keep the newer, as PostgreSQL (the rebuild) does."""
    season = make_season(rule=ScoringRule.LATEST, order=order, status=SeasonStatus.ACTIVE)
    at = season.starts_at + timedelta(hours=1)
    older, older_xid = live.store(season, player_id=1, points=50, at=at)
    newer, newer_xid = live.store(season, player_id=1, points=20, at=at + timedelta(minutes=5))
    live.apply(board_redis, season, newer, newer_xid)
    live.apply(board_redis, season, older, older_xid)
    board = as_board(season)
    season_key = keys.board(board_id=board.id)
    day_key = keys.daily_board(board_id=board.id, day=at.date())
    for key in (season_key, day_key):
        [(player, score)] = board_read(board_redis, key).items()
        assert (player, board.codec.decode(score).points) == (1, 20), key
    before = board_read(board_redis, season_key)
    board_rebuild(board_id=board.id)
    assert board_read(board_redis, season_key) == before
