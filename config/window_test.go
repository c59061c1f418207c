package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/signoff-dev/signoff/record"
)

// TestParseWindow: window: takes day names, ranges and lists, HH:MM times
// (from later than to is overnight) and an IANA zone; anything else is
// refused at the line of the field that is wrong.
func TestParseWindow(t *testing.T) {
	approvalLine := `approval: {role: team_lead, count: 1, expires: 72h, self_approval: false, edit: true}`
	with := func(w string) string {
		return strings.Replace(valid, approvalLine, approvalLine+"\n      window:\n"+w, 1)
	}
	field := func(days, from, to, tz string) string {
		return "        days: " + days + "\n        from: " + from + "\n        to: " + to + "\n        tz: " + tz
	}
	weekdays := []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}
	tests := []struct {
		name   string
		yaml   string
		window *record.Window // rules[0]'s on success
		want   string
	}{
		{"weekdays", with(field("mon-fri", `"09:00"`, `"17:00"`, "America/New_York")),
			&record.Window{Days: weekdays, From: "09:00", To: "17:00", TZ: "America/New_York"}, ""},
		{"a list and a range", with(field(`"mon,wed-fri"`, `"09:00"`, `"17:00"`, "UTC")),
			&record.Window{Days: []time.Weekday{time.Monday, time.Wednesday, time.Thursday, time.Friday}, From: "09:00", To: "17:00", TZ: "UTC"}, ""},
		{"the weekend, overnight", with(field(`"sat,sun"`, `"22:00"`, `"06:00"`, "Europe/Paris")),
			&record.Window{Days: []time.Weekday{time.Sunday, time.Saturday}, From: "22:00", To: "06:00", TZ: "Europe/Paris"}, ""},
		{"none", valid, nil, ""},
		{"unknown day", with(field("mon-fry", `"09:00"`, `"17:00"`, "UTC")), nil,
			`signoff.yaml:13: policy.rules[0].window.days: "fry" is not a day: write sun, mon, tue, wed, thu, fri or sat, ranges like mon-fri, separated by commas`},
		{"bad from", with(field("mon", `"9am"`, `"17:00"`, "UTC")), nil,
			`signoff.yaml:14: policy.rules[0].window.from: "9am" is not a time of day: write it like 09:00 or 17:30`},
		{"bad to", with(field("mon", `"09:00"`, `"24:00"`, "UTC")), nil,
			`signoff.yaml:15: policy.rules[0].window.to: "24:00" is not a time of day: write it like 09:00 or 17:30`},
		{"empty", with(field("mon", `"09:00"`, `"09:00"`, "UTC")), nil,
			`signoff.yaml:15: policy.rules[0].window.to: from and to are both 09:00: the window would be empty (or always open; leave window: out for that)`},
		{"unknown zone", with(field("mon", `"09:00"`, `"17:00"`, "Mars/Olympus")), nil,
			`signoff.yaml:16: policy.rules[0].window.tz: unknown time zone "Mars/Olympus": write an IANA name like America/New_York or UTC`},
		{"missing tz", with("        days: mon\n        from: \"09:00\"\n        to: \"17:00\""), nil,
			`signoff.yaml:12: policy.rules[0].window.tz: required: a window needs days, from, to and tz, e.g. {days: mon-fri, from: "09:00", to: "17:00", tz: America/New_York}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("signoff.yaml", []byte(tt.yaml))
			if tt.want != "" {
				if err == nil || err.Error() != tt.want {
					t.Fatalf("error\n got: %v\nwant: %s", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Policy.Rules()[0].Window; !reflect.DeepEqual(got, tt.window) {
				t.Fatalf("window %+v, want %+v", got, tt.window)
			}
		})
	}
}
