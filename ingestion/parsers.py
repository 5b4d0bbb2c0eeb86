"""The HTTP door's body parser: bounded in size before reading, in depth before validating.

DRF's ``JSONParser`` reads the whole stream (``DATA_UPLOAD_MAX_MEMORY_SIZE`` only applies to
form parsing) and lets ``json`` recurse on nesting: a body of 5,000 ``[`` was a RecursionError,
a 500. Here the declared Content-Length is checked before anything is read, the read itself
stops one byte past the cap (a stream whose length was not declared, e.g. chunked, cannot run
on), and the parsed value may nest only as deep as a result list needs plus room for
producers' extra fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

import orjson
from django.conf import settings
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import BaseParser

from .schema import integers_read_as_floats, json_loads_exact

# A body is a list of flat objects (depth 2); extra fields may hold small structures. Beyond
# this, Python's json (DRF's validation re-encodes items) recurses out of stack near 1,000.
MAX_JSON_DEPTH = 32


class RequestBodyTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "body_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the request body exceeds {limit} bytes; send at most that much per request "
            "(split the results over several requests)"
        )


def _declared_length(meta: Mapping[str, Any]) -> int | None:
    try:
        return int(meta.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None


def json_depth_exceeds(value: object, limit: int) -> bool:
    """Whether ``value`` nests containers deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def json_body_decode(raw: bytes) -> Any:
    """Parse a request body as JSON; ``ParseError`` (400) with a reason when it is not."""
    try:
        # orjson refuses nesting past 1,024 levels by itself and never recurses on the stack.
        value = orjson.loads(raw)
        exact = integers_read_as_floats(value)
    except orjson.JSONDecodeError as fast:
        if fast.msg.startswith("depth limit"):
            raise ParseError(
                f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels"
            ) from None
        exact = True
    if exact:
        # orjson refuses some valid JSON (integers beyond a double, lone surrogates) and reads
        # integers past 64 bits as floats: Python's json decides, so such an item gets its own
        # per-item reason (an integer out of range, not a float) as on the Kafka path.
        try:
            value = json_loads_exact(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - the body is not UTF-8: {exc}") from None
        except RecursionError:
            raise ParseError(
                f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels"
            ) from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
    if json_depth_exceeds(value, MAX_JSON_DEPTH):
        raise ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels")
    return value


class BoundedJSONParser(BaseParser):
    """JSON bodies of at most ``INGEST_HTTP_MAX_BODY_BYTES``: 413 past it, nothing parsed."""

    media_type = "application/json"

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit: int = settings.INGEST_HTTP_MAX_BODY_BYTES
        request = (parser_context or {}).get("request")
        meta: Mapping[str, Any] = getattr(request, "META", {})
        declared = _declared_length(meta)
        if declared is not None and declared > limit:
            raise RequestBodyTooLarge(limit)
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise RequestBodyTooLarge(limit)
        return json_body_decode(raw)
