package app

import "strings"

// shellLine joins a command's words as a POSIX shell reads them back: each word
// that holds anything but plainly safe characters is single-quoted, so a line
// printed for people can be pasted as it is.
func shellLine(words ...string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = shellQuote(w)
	}
	return strings.Join(out, " ")
}

// shellQuote quotes one word for a POSIX shell, only when it needs it.
func shellQuote(w string) string {
	if w == "" {
		return "''"
	}
	safe := true
	for _, r := range w {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:,=@%+", r)) {
			safe = false
			break
		}
	}
	if safe {
		return w
	}
	// Inside single quotes nothing is special but the quote itself, which is
	// closed, escaped and reopened.
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
