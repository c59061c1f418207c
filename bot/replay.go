package bot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// Every signed request counts once. A copy of a signed request is valid for as
// long as its timestamp is (MaxSkew), and the engine alone cannot tell a copy
// from a second request of the same person: /runs extend sent three times
// would move the deadline three times. So the first copy is claimed in the
// store, under a digest of what Slack signed, before anything is decided, and
// its answer is kept: every later copy, on any replica, gets that answer and
// changes nothing. Slack's own retries (X-Slack-Retry-Num) carry the same
// timestamp, body and signature, so they are copies too.
//
// An Approve click is claimed in the engine's transaction that records its
// decision, with its answer, which is known before anything is decided: one
// commit in all. A copy then either finds the claim and its answer, or,
// while the first is deciding, waits on the claim's key for its commit; if
// the first died before committing, nothing was decided and nothing claimed,
// and the copy is handled as the first.

// HeaderRetryNum is set by Slack on its own retries of a request.
const HeaderRetryNum = "X-Slack-Retry-Num"

// ReplayMargin is how long past its signature window a request's digest is
// kept: replicas' clocks disagree a little, and one that runs behind still
// accepts the request after the others have stopped.
const ReplayMargin = 5 * time.Minute

// socketReplayWindow is how long a Socket Mode envelope id is kept: Slack
// redelivers an envelope that was not acknowledged within a few minutes.
const socketReplayWindow = 2*MaxSkew + ReplayMargin

// forgetBatch bounds one sweep's delete, so that it never holds the store
// for long; the next tick takes the rest.
const forgetBatch = 500

// answerTimeout bounds recording an answer, which goes on after the client
// has gone: the request's effects are committed and later copies need it.
const answerTimeout = 5 * time.Second

// answer is one HTTP answer as sent, kept so that a copy gets it byte for byte.
type answer struct {
	status      int
	contentType string // "" with no body
	body        []byte
}

// signedDigest names a signed request by what Slack signed ("v0:ts:body"), so
// that only the holder of the signing secret can make a new one.
func signedDigest(ts string, body []byte) string {
	h := sha256.New()
	h.Write([]byte("v0:" + ts + ":"))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// socketDigest names a Socket Mode envelope; the prefix keeps it apart from
// every signed request's digest.
func socketDigest(envelopeID string) string {
	sum := sha256.Sum256([]byte("socket:" + envelopeID))
	return hex.EncodeToString(sum[:])
}

// serveSigned answers one request to path kind once: it verifies the
// signature, claims the request's digest in its own transaction, and only
// then lets handle decide anything. A request that fails verification is
// refused before the claim: only a correctly signed request can take a
// digest, so a forged or mangled copy never blocks the real one.
//
// An Approve click (clickOf, when given, finds it) is not claimed first: its
// claim goes to the engine with the decision, so that the claim, the decision
// and the answer are one commit (see serveClick).
func (s *Server) serveSigned(c echo.Context, kind string, clickOf func(raw []byte) *click, handle func(ctx context.Context, raw []byte) (Response, error)) error {
	raw, err := s.readVerified(c)
	if err != nil {
		return writeAnswer(c, s.errorAnswer(c, kind, err))
	}
	ctx := c.Request().Context()
	ts := c.Request().Header.Get(HeaderTimestamp) // digits only: verified above
	secs, _ := strconv.ParseInt(ts, 10, 64)
	now := s.clock.Now()
	req := &record.SeenRequest{Digest: signedDigest(ts, raw), CreatedAt: now,
		ExpiresAt: time.Unix(secs, 0).Add(MaxSkew + ReplayMargin)}
	log := s.log.With("kind", kind, "request_digest", req.Digest[:16], "retry_num", c.Request().Header.Get(HeaderRetryNum), "remote_addr", c.RealIP())
	if clickOf != nil {
		if ck := clickOf(raw); ck != nil {
			return s.serveClick(c, log, req, ck)
		}
	}
	first, claimed, err := s.claim(ctx, req)
	if err != nil {
		return writeAnswer(c, s.errorAnswer(c, kind, err))
	}
	if !claimed {
		s.refused("replay")
		return writeAnswer(c, s.copyAnswer(ctx, log, first, c.Request().Header.Get(HeaderRetryNum) != ""))
	}
	resp, err := handle(ctx, raw)
	a := s.answerOf(c, kind, resp, err)
	s.recordAnswer(ctx, log, first, a)
	return writeAnswer(c, a)
}

// serveClick answers an Approve click. Its answer is known before anything
// is decided (an empty 200: a refusal is told in an ephemeral message), so
// the claim carries it into the engine's transaction that records the
// decision or the refusal. A copy finds the claim and gets the first answer;
// a copy that comes while the first is deciding waits for its commit (the
// claim's unique key), or, if the first died before committing, finds
// nothing claimed and is handled as the first, since nothing was decided.
func (s *Server) serveClick(c echo.Context, log *slog.Logger, req *record.SeenRequest, ck *click) error {
	a := answer{status: http.StatusOK}
	req.AnsweredAt, req.Status = s.clock.Now(), a.status
	ck.claim = req
	if first := s.approve(c.Request().Context(), ck, ck.log); first != nil {
		s.refused("replay")
		return writeAnswer(c, s.copyAnswer(c.Request().Context(), log, first, c.Request().Header.Get(HeaderRetryNum) != ""))
	}
	return writeAnswer(c, a)
}

// claim takes req's digest in a transaction of its own, committed before the
// request is handled, so that a copy on another replica sees it at once.
func (s *Server) claim(ctx context.Context, req *record.SeenRequest) (first *record.SeenRequest, claimed bool, err error) {
	first, claimed, err = s.seen.Claim(ctx, req)
	if err != nil {
		return nil, false, fmt.Errorf("claim slack request: %w", err)
	}
	return first, claimed, nil
}

// copyAnswer is what a copy of a claimed request gets: the first answer, or,
// while there is none, a 503 that changes nothing. There is none while the
// first copy is still being handled, or if its process died before answering;
// the copy is not handled again, since the first may have acted. A person
// whose click was lost that way clicks again: that is a new request, and a
// decision is a compare-and-set in the engine, so a click that did land is
// told so instead of counting twice.
func (s *Server) copyAnswer(ctx context.Context, log *slog.Logger, first *record.SeenRequest, slackRetry bool) answer {
	level := slog.LevelWarn // a copy without X-Slack-Retry-Num is not Slack's doing
	if slackRetry {
		level = slog.LevelInfo
	}
	if first.Answered() {
		log.Log(ctx, level, "slack request repeated: answered as the first time", "first_at", first.CreatedAt, "status", first.Status)
		return answer{status: first.Status, contentType: first.ContentType, body: first.Body}
	}
	log.Log(ctx, level, "slack request repeated while the first copy has no answer: refused", "first_at", first.CreatedAt)
	return answer{status: http.StatusServiceUnavailable, contentType: echo.MIMETextPlainCharsetUTF8,
		body: []byte("This request is already being handled.")}
}

// recordAnswer keeps the first copy's answer for the copies that follow, even
// when the client has hung up: what the request did is committed. A failure
// leaves the request claimed without an answer, so copies get the 503.
func (s *Server) recordAnswer(ctx context.Context, log *slog.Logger, first *record.SeenRequest, a answer) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerTimeout)
	defer cancel()
	r := *first
	r.AnsweredAt, r.Status, r.ContentType, r.Body = s.clock.Now(), a.status, a.contentType, a.body
	if err := s.seen.Answer(ctx, &r); err != nil {
		log.Error("record the answer of a slack request", "err", err)
	}
}

// answerOf turns a handler's outcome into the bytes to send.
func (s *Server) answerOf(c echo.Context, kind string, resp Response, err error) answer {
	if err != nil {
		return s.errorAnswer(c, kind, err)
	}
	if resp.Body == nil {
		return answer{status: http.StatusOK}
	}
	b, err := json.Marshal(resp.Body)
	if err != nil {
		return s.errorAnswer(c, kind, fmt.Errorf("encode the answer: %w", err))
	}
	return answer{status: http.StatusOK, contentType: echo.MIMEApplicationJSON, body: append(b, '\n')}
}

// errorAnswer logs why a request is refused and says so in its status.
func (s *Server) errorAnswer(c echo.Context, kind string, err error) answer {
	status := statusOf(err)
	level := slog.LevelWarn
	switch {
	case status >= 500:
		level = slog.LevelError
	case status == http.StatusRequestTimeout:
		// A client that stalled: nothing is wrong here, and no client can
		// raise the alerts on errors by stalling.
		level = slog.LevelInfo
	}
	s.log.Log(c.Request().Context(), level, "slack request refused", "kind", kind, "status", status, "remote_addr", c.RealIP(), "err", err)
	return answer{status: status, contentType: echo.MIMETextPlainCharsetUTF8, body: []byte(http.StatusText(status))}
}

func writeAnswer(c echo.Context, a answer) error {
	if a.contentType == "" && len(a.body) == 0 {
		return c.NoContent(a.status)
	}
	if a.status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", "1")
	}
	return c.Blob(a.status, a.contentType, a.body)
}

// ForgetSeen deletes a batch of the requests seen whose window has passed by
// now; serve's sweep calls it on every tick.
func ForgetSeen(ctx context.Context, seen *workflow.Replays, now time.Time) (int, error) {
	n, err := seen.Forget(ctx, now, forgetBatch)
	if err != nil {
		return 0, fmt.Errorf("forget slack requests past their window: %w", err)
	}
	return n, nil
}
