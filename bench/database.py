"""The database a benchmark runs in: its own, on the server ``DATABASE_URL`` points at.

Imported by the bench scripts before Django is set up (they set ``DATABASE_URL`` from it), so
nothing here touches Django.
"""

from __future__ import annotations

import os

# The local server on the port devservices gives it (as leaderboard_project/local_clusters.py).
DEFAULT_DATABASE_URL = (
    "postgres://leaderboard:leaderboard@127.0.0.1:"
    f"{os.environ.get('LB_PG_PORT') or 5432}/leaderboard"
)


def bench_secret_key_default(*, bench: str) -> None:
    """Benchmarks run with DEBUG off, as production does; settings refuse that with the
    published development key, so each bench has a key of its own unless one is set."""
    os.environ.setdefault("DJANGO_SECRET_KEY", f"bench-{bench}-only-not-a-secret-" + "x" * 32)


def bench_database_url(*, name: str) -> str:
    """The URL of database ``name`` beside the configured one, created if it does not exist."""
    import environ
    import psycopg

    parsed = environ.Env.db_url_config(os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL)
    server = (
        f"postgres://{parsed['USER']}:{parsed['PASSWORD']}@{parsed['HOST']}:"
        f"{parsed['PORT'] or 5432}"
    )
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"
