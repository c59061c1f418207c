package config

import (
	"fmt"
	"strings"

	"github.com/signoff-dev/signoff/record"
)

// fileWindow is a rule's window: when its approved actions may run.
type fileWindow struct {
	Days string `yaml:"days"`
	From string `yaml:"from"`
	To   string `yaml:"to"`
	TZ   string `yaml:"tz"`
}

// window reads a rule's window:, each field refused at its own line: days
// (names and ranges, comma separated), from and to (HH:MM; from later than
// to is an overnight window) and tz (an IANA time zone).
func (c *checker) window(i int, fw *fileWindow) (*record.Window, error) {
	if fw == nil {
		return nil, nil
	}
	path := fmt.Sprintf("policy.rules[%d].window", i)
	for _, f := range []struct{ name, v string }{{"days", fw.Days}, {"from", fw.From}, {"to", fw.To}, {"tz", fw.TZ}} {
		if strings.TrimSpace(f.v) == "" {
			return nil, c.failf(path+"."+f.name, "required: a window needs days, from, to and tz, e.g. {days: mon-fri, from: \"09:00\", to: \"17:00\", tz: America/New_York}")
		}
	}
	days, err := record.ParseDays(fw.Days)
	if err != nil {
		return nil, c.fail(path+".days", err)
	}
	w := &record.Window{Days: days, From: strings.TrimSpace(fw.From), To: strings.TrimSpace(fw.To), TZ: strings.TrimSpace(fw.TZ)}
	if _, err := record.ParseClock(w.From); err != nil {
		return nil, c.fail(path+".from", err)
	}
	if _, err := record.ParseClock(w.To); err != nil {
		return nil, c.fail(path+".to", err)
	}
	if err := w.Check(); err != nil {
		field := ".tz"
		if w.From == w.To {
			field = ".to"
		}
		return nil, c.fail(path+field, err)
	}
	return w, nil
}
