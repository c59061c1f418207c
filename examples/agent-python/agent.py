#!/usr/bin/env python3
"""An agent that asks signoff before it acts, with the standard library only.

    export SIGNOFF_URL=http://localhost:8080 SIGNOFF_TOKEN=sk_...
    python3 agent.py proposal.json          # submit, wait for the outcome
    python3 agent.py --self-test            # the unit checks (no server)

It submits the proposal (POST /v1/runs), long-polls GET /v1/runs/{id}/wait
until the run leaves waiting_approval / executing, prints the outcome and
exits as `signoff` does: 0 done, 1 failed, 2 refused (nothing changed),
4 rejected / expired / cancelled, 5 needs attention.

verify_callback() checks a callback signoff POSTs to the proposal's
callback_url: Standard Webhooks 1.0, the same scheme as
examples/verify/verify_webhook.py. serve_callbacks() is a small receiver
built on it.
"""
import base64
import hashlib
import hmac
import http.server
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

ACTIVE = {"running", "waiting_approval", "executing"}
EXIT = {"done": 0, "failed": 1, "rejected": 4, "expired": 4, "cancelled": 4, "needs_attention": 5}
TOLERANCE = 5 * 60  # seconds; an older callback is a replay


def safe(s):
    """Text from the server may hold what an agent wrote: show it inert."""
    return "".join(c if c.isprintable() else "\\x%02x" % ord(c) if ord(c) < 0x100 else "\\u%04x" % ord(c) for c in str(s))


class Refused(Exception):
    """A problem+json answer (RFC 9457)."""

    def __init__(self, status, problem):
        self.status, self.problem = status, problem
        super().__init__("%s %s: %s" % (status, problem.get("code"), problem.get("detail", "")))


class Client:
    def __init__(self, base_url, token, timeout=150):
        self.base = base_url.rstrip("/") + "/v1"
        self.token = token
        self.timeout = timeout

    def call(self, method, path, body=None, query=None):
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                problem = json.loads(raw)
            except ValueError:
                problem = {"code": "http_%d" % e.code, "detail": raw[:200].decode("utf-8", "replace")}
            if e.code == 429:
                problem["retry_after"] = int(e.headers.get("Retry-After", "1"))
            raise Refused(e.code, problem) from None

    def submit(self, proposal_bytes):
        return self.call("POST", "/runs", proposal_bytes)[1]

    def wait(self, run_id, status, timeout=60):
        q = {"timeout": timeout, "status": status}
        return self.call("GET", "/runs/%s/wait" % urllib.parse.quote(run_id, safe=""), query=q)[1]


def run_until_decided(client, proposal_bytes, out=sys.stdout):
    """Submit, then wait until the run is no longer active; return its exit code."""
    res = client.submit(proposal_bytes)
    run_id, status = res["id"], res["status"]
    print("run %s %s%s" % (safe(run_id), safe(status), " (replayed)" if res.get("replayed") else ""), file=out)
    if "approval" in res:
        a = res["approval"]
        print("  waiting for %d approval(s) from %s by %s" % (a["remaining"], safe(a["role"]), safe(a["deadline"])), file=out)
    run = None
    while status in ACTIVE:
        try:
            w = client.wait(run_id, status)
        except Refused as e:
            if e.status != 429:
                raise
            time.sleep(e.problem["retry_after"])
            continue
        status = w["run"]["status"]
        if w["changed"]:
            print("  now %s" % safe(status), file=out)
        run = w["run"]
    if run is None:
        run = client.call("GET", "/runs/%s" % urllib.parse.quote(run_id, safe=""))[1]
    reason = run.get("reason")
    print("outcome: %s%s" % (safe(status), (" (" + safe(reason) + ")") if reason else ""), file=out)
    for op in run.get("operations", []):
        receipt = op.get("receipt") or {}
        print("  %s %s %s" % (safe(op["key"]), safe(op["status"]), safe(receipt.get("id", ""))), file=out)
    return EXIT.get(status, 1)


def verify_callback(secrets, headers, body, now=None):
    """Check a callback from signoff; raise ValueError when it must be refused.

    secrets: one whsec_ secret or several (while a key rotates). headers: the
    lower-case header names and their values. body: the raw bytes, before any
    JSON parsing. Returns the event id (webhook-id): a repeat of an id already
    handled is a redelivery, to acknowledge and ignore.
    """
    if isinstance(secrets, str):
        secrets = [secrets]
    msg_id = headers.get("webhook-id", "")
    timestamp = headers.get("webhook-timestamp", "")
    if not msg_id or not timestamp.isdigit():
        raise ValueError("missing webhook-id or webhook-timestamp")
    now = time.time() if now is None else now
    if abs(now - int(timestamp)) > TOLERANCE:
        raise ValueError("webhook-timestamp is too far from now")
    signed = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    for secret in secrets:
        if not secret.startswith("whsec_"):
            raise ValueError("a secret starts with whsec_")
        key = base64.b64decode(secret[len("whsec_"):])
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        for signature in headers.get("webhook-signature", "").split():
            version, _, value = signature.partition(",")
            if version == "v1" and hmac.compare_digest(value.encode(), expected.encode()):
                return msg_id
    raise ValueError("no valid signature")


def serve_callbacks(port, secrets, handle):
    """Receive callbacks on port; handle(event) gets each verified one once."""
    seen = set()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(min(int(self.headers.get("Content-Length", "0")), 1 << 20))
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                event_id = verify_callback(secrets, headers, body)
            except ValueError as e:
                self.send_error(401, str(e))
                return
            if event_id not in seen:
                seen.add(event_id)
                handle(json.loads(body))
            self.send_response(204)
            self.end_headers()

    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()


def self_test():
    # The Standard Webhooks specification's example.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    headers = {
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": "v1,bm9wZQ== v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }
    body = b'{"test": 2432232314}'
    at = 1614265330
    assert verify_callback(secret, headers, body, now=at) == "msg_p5jXN8AQM9LWM0D4loKWxJek"
    assert verify_callback(["whsec_" + base64.b64encode(b"old" * 8).decode(), secret], headers, body, now=at)
    refuse = [
        ("a changed body", secret, headers, b'{"test": 2432232315}', at),
        ("six minutes late", secret, headers, body, at + 360),
        ("six minutes early", secret, headers, body, at - 360),
        ("another secret", "whsec_" + base64.b64encode(b"x" * 24).decode(), headers, body, at),
        ("no signature", secret, dict(headers, **{"webhook-signature": ""}), body, at),
        ("a v2 signature", secret, dict(headers, **{"webhook-signature": "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}), body, at),
        ("another id", secret, dict(headers, **{"webhook-id": "msg_other"}), body, at),
        ("no id", secret, {k: v for k, v in headers.items() if k != "webhook-id"}, body, at),
        ("a secret without whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", headers, body, at),
    ]
    for name, s, h, b, now in refuse:
        try:
            verify_callback(s, h, b, now=now)
        except ValueError:
            continue
        raise AssertionError("verified what it must refuse: " + name)
    assert verify_callback(secret, headers, body, now=at + 299)
    assert safe("ok\x1b[2Jgone\u202e") == "ok\\x1b[2Jgone\\u202e", safe("ok\x1b[2Jgone\u202e")
    assert EXIT["done"] == 0 and EXIT["cancelled"] == 4 and EXIT["needs_attention"] == 5
    print("ok")


def main(argv):
    if argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    url, token = os.environ.get("SIGNOFF_URL"), os.environ.get("SIGNOFF_TOKEN")
    if not url or not token:
        print("set SIGNOFF_URL and SIGNOFF_TOKEN", file=sys.stderr)
        return 2
    with open(argv[1], "rb") as f:
        proposal = f.read()
    try:
        return run_until_decided(Client(url, token), proposal)
    except Refused as e:
        p = e.problem
        print("refused (%d %s): %s" % (e.status, safe(p.get("code")), safe(p.get("detail", ""))), file=sys.stderr)
        for fe in p.get("errors", []):
            print("  %s: %s" % (safe(fe["field"]), safe(fe["message"])), file=sys.stderr)
        return 2 if e.status < 500 else 1
    except (urllib.error.URLError, OSError) as e:
        print("signoff unreachable: %s" % safe(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
