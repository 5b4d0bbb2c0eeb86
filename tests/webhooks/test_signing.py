"""The signature, checked by implementations other than the product's: HMAC written out from
hashlib (RFC 2104) and the openssl command line."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from webhooks.signing import SignatureInvalid, signature_header, signature_verify

from .webhook_helpers import SECRET, hmac_sha256_by_hand, verify_independently

BODY = b'[{"eventId":"e1","type":"entered_top","seasonId":12,"board":"main","rank":3}]'


def test_the_header_is_t_and_v1_over_time_dot_body():
    header = signature_header(secret=SECRET, timestamp=1_800_000_000, body=BODY)
    assert header.startswith("t=1800000000,v1=")
    assert verify_independently(secret=SECRET, header=header, body=BODY) == 1_800_000_000


def test_the_hand_written_hmac_agrees_with_rfc_4231_test_case_2():
    # RFC 4231, test case 2 (HMAC-SHA-256): the reference the independent check is held to.
    assert hmac_sha256_by_hand(b"Jefe", b"what do ya want for nothing?") == (
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    )


def test_openssl_computes_the_same_signature():
    openssl = shutil.which("openssl")
    assert openssl, "openssl is part of the machine's base system"
    header = signature_header(secret=SECRET, timestamp=1_800_000_123, body=BODY)
    computed = subprocess.run(
        [openssl, "dgst", "-sha256", "-hmac", SECRET, "-r"],
        input=b"1800000123." + BODY,
        capture_output=True,
        check=True,
    )
    assert header == f"t=1800000123,v1={computed.stdout.split()[0].decode()}"


def test_verify_accepts_the_genuine_request_and_says_why_it_refuses_others():
    now = 1_800_000_000
    header = signature_header(secret=SECRET, timestamp=now, body=BODY)
    assert signature_verify(secret=SECRET, header=header, body=BODY, now=now + 10) == now
    # A sender rotating its secret may send two v1 values: either one matching is enough.
    old = signature_header(secret="old-secret-0123456789", timestamp=now, body=BODY)
    both = f"{header},v1={old.split('v1=')[1]}"
    assert signature_verify(secret="old-secret-0123456789", header=both, body=BODY, now=now)
    cases = [
        (None, BODY, now, "no X-Leaderboard-Signature"),
        ("v1=abc", BODY, now, "malformed"),
        (header, BODY + b" ", now, "does not match"),
        (header, BODY, now + 301, "outside the tolerance"),
        (header.replace("t=1800000000", "t=1800000001"), BODY, now, "does not match"),
        (signature_header(secret="x" * 20, timestamp=now, body=BODY), BODY, now, "does not match"),
        # What a hostile sender may write instead of a time or a signature: refused, never a
        # crash (int() of 5,000 digits raises, 10^400 seconds overflows, "²" is a digit to
        # isdigit(), compare_digest refuses non-ASCII text).
        (f"t={'9' * 5000},v1=ab", BODY, now, "malformed"),
        (f"t=1{'0' * 400},v1=ab", BODY, now, "malformed"),
        ("t=\u00b2,v1=ab", BODY, now, "malformed"),
        (f"t={now},v1=\u00e9", BODY, now, "malformed"),
    ]
    for given, body, at, reason in cases:
        with pytest.raises(SignatureInvalid, match=reason):
            signature_verify(secret=SECRET, header=given, body=body, now=at)
