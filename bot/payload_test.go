package bot

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseInteractionStrict(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload string
		want    error
	}{
		{"minimal", `{"type":"block_actions","api_app_id":"A1","user":{"id":"U1","team_id":"T1"}}`, nil},
		{"unknown fields are Slack's to add", `{"type":"block_actions","brand_new":{"x":[1,2]},"user":{"id":"U1","also_new":true}}`, nil},
		{"team null", `{"type":"block_actions","team":null,"enterprise":{"id":"E1"},"user":{"id":"U1"}}`, nil},
		{"no type", `{"api_app_id":"A1"}`, ErrMalformed},
		{"not JSON", `payload`, ErrMalformed},
		{"empty", ``, ErrMalformed},
		{"array", `[{"type":"block_actions"}]`, ErrMalformed},
		{"trailing data", `{"type":"block_actions"} {"type":"x"}`, ErrMalformed},
		{"duplicate key", `{"type":"block_actions","api_app_id":"A1","api_app_id":"A2"}`, ErrMalformed},
		{"duplicate key nested", `{"type":"block_actions","user":{"id":"U1","id":"U2"}}`, ErrMalformed},
		{"duplicate key in an unread part", `{"type":"block_actions","message":{"blocks":[{"type":"x","type":"y"}]}}`, ErrMalformed},
		{"wrong type", `{"type":"block_actions","is_enterprise_install":"true"}`, ErrMalformed},
		{"invalid UTF-8", "{\"type\":\"block_actions\",\"user\":{\"id\":\"U\xff\"}}", ErrMalformed},
		{"too large", `{"type":"block_actions","pad":"` + strings.Repeat("x", MaxPayload) + `"}`, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ic, err := ParseInteraction([]byte(tc.payload))
			if tc.want == nil && (err != nil || ic == nil) || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("ParseInteraction = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestParseSlackCorpusShapes parses payload shapes Slack sends, kept as
// fixtures, and reads the fields the checks depend on.
func TestParseFixtures(t *testing.T) {
	ref := Ref{RunID: "run_1", RequestID: "req_1", Fingerprint: strings.Repeat("0f", 32)}
	for _, tc := range []struct {
		file                   string
		typ, userTeam, team    string
		enterprise, actionOrCB string
	}{
		{"block_actions_approve.json", TypeBlockActions, "T0SHOP0001", "T0SHOP0001", "", ActionApprove},
		{"block_actions_org_wide_install.json", TypeBlockActions, "T0WAREHSE1", "", "E0SHOPORG1", ActionApprove},
		{"block_actions_enterprise_grid.json", TypeBlockActions, "T0WAREHSE1", "T0WAREHSE1", "E0SHOPORG1", ActionApprove},
		{"block_actions_shared_channel_our_user.json", TypeBlockActions, "T0SHOP0001", "T0PARTNER1", "", ActionApprove},
		{"view_submission_reject.json", TypeViewSubmission, "T0SHOP0001", "T0SHOP0001", "", CallbackReject},
	} {
		t.Run(tc.file, func(t *testing.T) {
			ic, err := ParseInteraction(fixture(t, tc.file, ref, "U0LEAD0001", map[string]string{"REASON": "r", "ARGS": "{}"}))
			if err != nil {
				t.Fatal(err)
			}
			team, ent, got := "", "", ""
			if ic.Team != nil {
				team = ic.Team.ID
			}
			if ic.Enterprise != nil {
				ent = ic.Enterprise.ID
			}
			if len(ic.Actions) == 1 {
				got = ic.Actions[0].ActionID
				if r, err := ParseRef(ic.Actions[0].Value); err != nil || r != ref {
					t.Errorf("button value %q: %+v %v", ic.Actions[0].Value, r, err)
				}
			} else if ic.View != nil {
				got = ic.View.CallbackID
			}
			if ic.Type != tc.typ || ic.User.ID != "U0LEAD0001" || ic.User.TeamID != tc.userTeam || team != tc.team || ent != tc.enterprise || got != tc.actionOrCB {
				t.Errorf("parsed %+v user %+v team %q enterprise %q action %q", ic, ic.User, team, ent, got)
			}
		})
	}
}

func TestOriginRules(t *testing.T) {
	both := Origin{AppID: "A0SIGNOFF1", TeamID: "T0SHOP0001", EnterpriseID: "E0SHOPORG1"}
	teamOnly := Origin{AppID: "A0SIGNOFF1", TeamID: "T0SHOP0001"}
	orgOnly := Origin{AppID: "A0SIGNOFF1", EnterpriseID: "E0SHOPORG1"}
	user := func(id, team string) *User { return &User{ID: id, TeamID: team} }
	for _, tc := range []struct {
		name   string
		origin Origin
		ic     Interaction
		ok     bool
	}{
		{"our workspace", teamOnly, Interaction{APIAppID: "A0SIGNOFF1", User: user("U1", "T0SHOP0001"), Team: &Team{ID: "T0SHOP0001"}}, true},
		{"another app", both, Interaction{APIAppID: "A0OTHER", User: user("U1", "T0SHOP0001")}, false},
		{"no app", both, Interaction{User: user("U1", "T0SHOP0001")}, false},
		{"no user", both, Interaction{APIAppID: "A0SIGNOFF1"}, false},
		{"org-wide install, team null", orgOnly, Interaction{APIAppID: "A0SIGNOFF1", User: user("W1", "T0WAREHSE1"), Enterprise: &Enterprise{ID: "E0SHOPORG1"}}, true},
		{"org-wide install without the enterprise configured", teamOnly, Interaction{APIAppID: "A0SIGNOFF1", User: user("W1", "T0WAREHSE1"), Enterprise: &Enterprise{ID: "E0SHOPORG1"}}, false},
		{"grid workspace via team.enterprise_id", orgOnly, Interaction{APIAppID: "A0SIGNOFF1", User: user("W1", "T0WAREHSE1"), Team: &Team{ID: "T0WAREHSE1", EnterpriseID: "E0SHOPORG1"}}, true},
		{"user's team is the organisation", orgOnly, Interaction{APIAppID: "A0SIGNOFF1", User: user("W1", "E0SHOPORG1")}, true},
		{"shared channel, our user", teamOnly, Interaction{APIAppID: "A0SIGNOFF1", User: user("U1", "T0SHOP0001"), Team: &Team{ID: "T0PARTNER1"}}, true},
		{"shared channel, their user", both, Interaction{APIAppID: "A0SIGNOFF1", User: user("W9", "T0PARTNER1"), Team: &Team{ID: "T0PARTNER1", EnterpriseID: "E0PARTNER1"}, Enterprise: &Enterprise{ID: "E0PARTNER1"}}, false},
		{"team.id alone admits nobody", teamOnly, Interaction{APIAppID: "A0SIGNOFF1", User: user("W9", ""), Team: &Team{ID: "T0SHOP0001"}}, false},
		{"another enterprise", orgOnly, Interaction{APIAppID: "A0SIGNOFF1", User: user("W9", "T9"), Enterprise: &Enterprise{ID: "E0OTHER"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.origin.CheckInteraction(&tc.ic)
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrForbidden) {
				t.Fatalf("CheckInteraction = %v, want ok %v", err, tc.ok)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		origin Origin
		cmd    Command
		ok     bool
	}{
		{"our workspace", teamOnly, Command{APIAppID: "A0SIGNOFF1", TeamID: "T0SHOP0001"}, true},
		{"org-level app", orgOnly, Command{APIAppID: "A0SIGNOFF1", TeamID: "T0WAREHSE1", EnterpriseID: "E0SHOPORG1"}, true},
		{"another organisation", both, Command{APIAppID: "A0SIGNOFF1", TeamID: "T0PARTNER1", EnterpriseID: "E0PARTNER1"}, false},
		{"another app", both, Command{APIAppID: "A0OTHER", TeamID: "T0SHOP0001"}, false},
	} {
		t.Run("command "+tc.name, func(t *testing.T) {
			if err := tc.origin.CheckCommand(&tc.cmd); tc.ok != (err == nil) {
				t.Fatalf("CheckCommand = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestRef(t *testing.T) {
	good := Ref{RunID: "run_01a22a03beb60001db0e0344", RequestID: "req_01a22a03beb70002c0ffee01", Fingerprint: strings.Repeat("9b", 32)}
	s := good.String()
	if len(s) > 2000 || len(s) != 125 {
		t.Fatalf("value of %d characters: %s", len(s), s)
	}
	if r, err := ParseRef(s); err != nil || r != good {
		t.Fatalf("ParseRef(%q) = %+v %v", s, r, err)
	}
	longest := Ref{RunID: strings.Repeat("r", 64), RequestID: strings.Repeat("q", 64), Fingerprint: strings.Repeat("f", 64)}
	if n := len(longest.String()); n > 197 {
		t.Fatalf("the longest value is %d characters", n)
	}
	for _, bad := range []string{
		"", "v1", "v1:run:req", "v2:run_1:req_1:" + strings.Repeat("9b", 32),
		"v1:run_1:req_1:" + strings.Repeat("9B", 32), // upper case is not what we write
		"v1:run_1:req_1:" + strings.Repeat("9b", 31),
		"v1:run 1:req_1:" + strings.Repeat("9b", 32),
		"v1:run_1:req_1:" + strings.Repeat("9b", 32) + ":extra",
		"v1::req_1:" + strings.Repeat("9b", 32),
		"v1:" + strings.Repeat("r", 65) + ":req_1:" + strings.Repeat("9b", 32),
	} {
		if _, err := ParseRef(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseRef(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestParseCommand(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "fixtures", "slack", "slash_runs_org_level.form"))
	if err != nil {
		t.Fatal(err)
	}
	form, err := CommandForm([]byte(strings.NewReplacer("{{USER_ID}}", "W0LEAD0001", "{{TEXT}}", "show+run_1").Replace(string(b))))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCommand(form)
	if err != nil {
		t.Fatal(err)
	}
	if c.Command != "/runs" || c.Text != "show run_1" || c.UserID != "W0LEAD0001" || c.TeamID != "T0WAREHSE1" ||
		c.EnterpriseID != "E0SHOPORG1" || !c.IsEnterpriseInstall || c.APIAppID != "A0SIGNOFF1" {
		t.Fatalf("parsed %+v", c)
	}
	for name, mutate := range map[string]func(url.Values){
		"duplicate user":            func(v url.Values) { v.Add("user_id", "U0LEAD0001") },
		"duplicate app":             func(v url.Values) { v.Add("api_app_id", "A0OTHER") },
		"no user":                   func(v url.Values) { v.Del("user_id") },
		"no command":                func(v url.Values) { v.Del("command") },
		"no app":                    func(v url.Values) { v.Del("api_app_id") },
		"odd is_enterprise_install": func(v url.Values) { v.Set("is_enterprise_install", "yes") },
	} {
		f := url.Values{}
		for k, v := range form {
			f[k] = append([]string(nil), v...)
		}
		mutate(f)
		if _, err := ParseCommand(f); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if _, err := CommandForm([]byte("text=%zz")); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad escape: %v", err)
	}
}

func TestInteractionPayload(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{"payload=%7B%7D", true},
		{"payload=%7B%7D&token=x", true},
		{"", false},
		{"payload=", false},
		{"payload=a&payload=b", false},
		{"payload=%zz", false},
		{"payload=a;b", false},
	} {
		_, err := InteractionPayload([]byte(tc.body))
		if tc.ok != (err == nil) {
			t.Errorf("InteractionPayload(%q) = %v, want ok %v", tc.body, err, tc.ok)
		}
	}
}

// FuzzParseInteraction: never a panic; whatever parses has a type, and
// whatever the origin check admits names our app and a user.
func FuzzParseInteraction(f *testing.F) {
	ref := Ref{RunID: "run_1", RequestID: "req_1", Fingerprint: strings.Repeat("0f", 32)}
	for _, name := range []string{"block_actions_approve.json", "block_actions_org_wide_install.json", "view_submission_edit.json", "block_actions_shared_channel_foreign_user.json"} {
		f.Add(fixture(f, name, ref, "U0LEAD0001", map[string]string{"REASON": "r", "ARGS": `{"a":1}`}))
	}
	f.Add([]byte(`{"type":"block_actions","team":null,"user":{"id":"U","id":"V"}}`))
	f.Add([]byte(`{"type":"view_submission","view":{"state":{"values":{"a":{"b":{"value":null}}}}}}`))
	origin := Origin{AppID: "A0SIGNOFF1", TeamID: "T0SHOP0001", EnterpriseID: "E0SHOPORG1"}
	f.Fuzz(func(t *testing.T, payload []byte) {
		ic, err := ParseInteraction(payload)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		if ic.Type == "" {
			t.Fatal("parsed without a type")
		}
		if origin.CheckInteraction(ic) == nil && (ic.APIAppID != origin.AppID || ic.User == nil || ic.User.ID == "") {
			t.Fatalf("admitted %+v", ic)
		}
		for _, a := range ic.Actions {
			if r, err := ParseRef(a.Value); err == nil && mustParseRef(t, r.String()) != r {
				t.Fatalf("ref %q does not round-trip", a.Value)
			}
		}
	})
}

func mustParseRef(t *testing.T, s string) Ref {
	r, err := ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
