package workflow

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// CanonicalCallbackURL is raw in the one form signoff stores, matches against
// the allow-list and sends: the scheme in lower case and the path's dot
// segments resolved (RFC 3986, 5.2.4), so that "/cb/../evil" is "/evil" and no
// longer starts with "/cb/". Everything else is kept as written.
//
// It refuses what a server could read as a path other than the one matched,
// instead of guessing how that server decodes: a backslash anywhere; in the
// path an encoded dot, slash, backslash or percent sign (%2e, %2f, %5c, %25,
// the last because a second decoding makes it one of the others), a dot
// segment with parameters ("..;x") and the full-width dot, slash and
// backslash some servers fold to ASCII; and a percent sign in the host.
// raw must be an absolute http(s) URL.
func CanonicalCallbackURL(raw string) (string, error) {
	if strings.ContainsRune(raw, '\\') {
		return "", errors.New("must not contain a backslash: servers differ on whether it is a /")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "" ||
		!strings.EqualFold(raw[:len(u.Scheme)+3], u.Scheme+"://") {
		return "", errors.New("must be an absolute http(s) URL such as https://agents.example.com/signoff/events")
	}
	rest := raw[len(u.Scheme)+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, after := rest[:end], rest[end:]
	if strings.ContainsRune(authority, '%') {
		return "", errors.New("must not percent-encode its host")
	}
	end = strings.IndexAny(after, "?#")
	if end < 0 {
		end = len(after)
	}
	path, tail := after[:end], after[end:]
	if err := checkCallbackPath(path); err != nil {
		return "", err
	}
	return u.Scheme + "://" + authority + removeDotSegments(path) + tail, nil
}

// encodedInPath are the escapes a callback path may not hold, each with what
// it encodes, for the refusal.
var encodedInPath = []struct{ escape, what string }{
	{"%2e", "a dot"}, {"%2f", "a slash"}, {"%5c", "a backslash"}, {"%25", "a percent sign"},
}

// foldedToASCII are the characters some servers fold to ".", "/" or "\".
var foldedToASCII = []struct{ r, what string }{
	{"\uff0e", "a full-width dot"}, {"\uff0f", "a full-width slash"}, {"\uff3c", "a full-width backslash"},
}

// checkCallbackPath refuses a raw path whose segments a server could split
// or resolve otherwise than signoff does.
func checkCallbackPath(path string) error {
	lower := strings.ToLower(path)
	for _, e := range encodedInPath {
		if strings.Contains(lower, e.escape) {
			return fmt.Errorf("must not hold %s encoded as %s in its path: write the path as it is meant", e.what, e.escape)
		}
	}
	decoded, err := url.PathUnescape(path)
	if err != nil {
		return fmt.Errorf("has an invalid escape in its path: %v", err)
	}
	for _, f := range foldedToASCII {
		if strings.Contains(decoded, f.r) {
			return fmt.Errorf("must not hold %s (%+q) in its path", f.what, f.r)
		}
	}
	for _, seg := range strings.Split(path, "/") {
		if name, _, ok := strings.Cut(seg, ";"); ok && (name == "." || name == "..") {
			return fmt.Errorf("must not hold the dot segment %q with parameters in its path", seg)
		}
	}
	return nil
}

// removeDotSegments resolves the "." and ".." segments of an absolute path
// (or "") as RFC 3986, 5.2.4 does: ".." above the root stays at the root, and
// a path ending in a dot segment ends in "/".
func removeDotSegments(path string) string {
	if path == "" {
		return ""
	}
	segs := strings.Split(path, "/")[1:]
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
			continue
		}
		if last {
			out = append(out, "")
		}
	}
	return "/" + strings.Join(out, "/")
}
