"""Verify a request from signoff's webhook executor, with the standard library.

signoff signs as the Standard Webhooks 1.0 specification says, so that
project's libraries (pip install standardwebhooks) verify it too; this is the
same check in a dozen lines, for a target that wants no dependency.

    verify(secret, headers, body)   # raises ValueError when it must be refused

secret is the whsec_... value signoff signs with (several may be configured
while a key rotates; a target needs only the one it knows). headers maps the
lower-case header names to their values; body is the raw bytes of the request,
before any JSON parsing. Run this file to check it against the example of the
specification.
"""
import base64
import hashlib
import hmac
import time

TOLERANCE = 5 * 60  # seconds; an older message is a replay


def verify(secret, headers, body, now=None):
    msg_id = headers["webhook-id"]
    timestamp = headers["webhook-timestamp"]
    now = time.time() if now is None else now
    if abs(now - int(timestamp)) > TOLERANCE:
        raise ValueError("webhook-timestamp is too far from now")
    key = base64.b64decode(secret[len("whsec_"):] if secret.startswith("whsec_") else secret)
    signed = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    for signature in headers["webhook-signature"].split():
        version, _, value = signature.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return
    raise ValueError("no valid signature")


if __name__ == "__main__":
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    headers = {
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": "v1,bm9wZQ== v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }
    body = b'{"test": 2432232314}'
    verify(secret, headers, body, now=1614265330)
    for bad_body, at in ((b'{"test": 2432232315}', 1614265330), (body, 1614265330 + 3600)):
        try:
            verify(secret, headers, bad_body, now=at)
        except ValueError:
            continue
        raise SystemExit("verified what it must refuse")
    print("ok")
