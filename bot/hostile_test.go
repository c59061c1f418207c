package bot

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/signoff-dev/signoff/internal/texttest"
	"github.com/signoff-dev/signoff/workflow"
)

// hostileView is the refund waiting for a team lead, with the hostile corpus
// in every field its requester wrote: who they are, the task, the summary,
// the evidence, and every string argument.
func hostileView(t *testing.T) *workflow.RunView {
	corpus := texttest.Corpus(t)
	v := refundView()
	v.TaskID = corpus[1]
	v.Requester = record.Person{ID: corpus[2], Name: corpus[8]}
	v.Summary = strings.Join(corpus, " ")
	v.Evidence = nil
	for _, s := range corpus {
		data, _ := json.Marshal(map[string]any{"note": s, s: s, "list": []string{s}})
		v.Evidence = append(v.Evidence, record.Evidence{Source: s, Data: data})
	}
	args, _ := json.Marshal(map[string]any{"amount": 119, "currency": corpus[9], "order_id": corpus[0], "payment_id": corpus[4], "reason_code": corpus[8]})
	v.Actions = []record.Action{{Name: "request_refund", Args: args}}
	return v
}

var codeSpan = regexp.MustCompile("`[^`]*`")

// TestAgentTextOnlyInItsLabelledBlock: in the approval message, what the
// requester wrote appears only in the one plain-text block labelled as
// theirs; the action blocks hold the stored arguments, each in a code span
// where mrkdwn means nothing; no text anywhere carries a control, bidi or
// zero-width character; and exactly one action is listed.
func TestAgentTextOnlyInItsLabelledBlock(t *testing.T) {
	rc := goldenContext(t)
	rc.Redact = func(_ string, args json.RawMessage) json.RawMessage { return args } // show every argument
	for name, v := range map[string]*workflow.RunView{"waiting": hostileView(t), "done": done(hostileView(t))} {
		t.Run(name, func(t *testing.T) {
			blocks := RenderRun(v, rc)
			labelled, actions := 0, 0
			for i, b := range blocks {
				texts := blockTexts(b)
				for _, tx := range texts {
					if live := texttest.Live(tx.Text, true); live != "" {
						t.Errorf("block %d (%s) shows %s", i, b.BlockType(), live)
					}
				}
				sec, ok := b.(*slack.SectionBlock)
				switch {
				case ok && sec.Text != nil && strings.HasPrefix(sec.Text.Text, RequesterLabel):
					labelled++
					if sec.Text.Type != slack.PlainTextType {
						t.Errorf("the requester's block is %s, want plain_text", sec.Text.Type)
					}
					if !strings.Contains(sec.Text.Text, `\x1b[1A`) || !strings.Contains(sec.Text.Text, "*1. request_refund*") {
						t.Errorf("the requester's block does not show what they wrote, escaped:\n%s", sec.Text.Text)
					}
					if got := strings.Count(sec.Text.Text, "\n"); got > 3+len(v.Evidence)+1 {
						t.Errorf("the requester's words added lines: %d line breaks", got)
					}
				case ok && sec.Text != nil && regexp.MustCompile(`^\*\d+\. `).MatchString(sec.Text.Text):
					actions++
					if rest := codeSpan.ReplaceAllString(sec.Text.Text, ""); strings.Contains(rest, texttest.Marker) {
						t.Errorf("an argument is outside its code span:\n%s", sec.Text.Text)
					}
				default:
					for _, tx := range texts {
						if strings.Contains(tx.Text, texttest.Marker) {
							t.Errorf("block %d (%s) shows the requester's words outside their block: %q", i, b.BlockType(), tx.Text)
						}
					}
				}
			}
			if labelled != 1 || actions != 1 {
				t.Errorf("%d requester blocks and %d action blocks, want 1 and 1", labelled, actions)
			}
			if fb := FallbackText(v); strings.Contains(fb, texttest.Marker) || texttest.Live(fb, false) != "" {
				t.Errorf("the notification text shows the requester's words: %q", fb)
			}
		})
	}
}

// blockTexts is every text object of a block: header, section text and
// fields, context elements, buttons and their confirm dialogs.
func blockTexts(b slack.Block) []*slack.TextBlockObject {
	var out []*slack.TextBlockObject
	add := func(t *slack.TextBlockObject) {
		if t != nil {
			out = append(out, t)
		}
	}
	switch x := b.(type) {
	case *slack.HeaderBlock:
		add(x.Text)
	case *slack.SectionBlock:
		add(x.Text)
		for _, f := range x.Fields {
			add(f)
		}
	case *slack.ContextBlock:
		for _, el := range x.ContextElements.Elements {
			if tx, ok := el.(*slack.TextBlockObject); ok {
				add(tx)
			}
		}
	case *slack.ActionBlock:
		for _, el := range x.Elements.ElementSet {
			if btn, ok := el.(*slack.ButtonBlockElement); ok {
				add(btn.Text)
				add(&slack.TextBlockObject{Text: btn.Value})
				if c := btn.Confirm; c != nil {
					add(c.Title)
					add(c.Text)
				}
			}
		}
	}
	return out
}

// TestDistinctValuesNeverRenderAlike: every value of the hostile corpus (a
// backtick and its look-alike, a Cyrillic а, a no-break space, NFD and NFC,
// "10" and 10, "false" and false, …) is shown in the approval message in
// printable ASCII, whole, and unlike every other one; so is every corpus
// string used as a key (one too long to show whole is cut, and then the
// message cannot approve).
func TestDistinctValuesNeverRenderAlike(t *testing.T) {
	rc := goldenContext(t)
	rc.Redact = func(_ string, args json.RawMessage) json.RawMessage { return args }
	row := regexp.MustCompile("^• `([^`]*)`: `([^`]*)`$")
	shownAs := func(args string) (key, value string, whole bool) {
		t.Helper()
		text, whole := actionText(0, record.Action{Name: "request_refund", Args: json.RawMessage(args)}, rc)
		lines := strings.Split(text, "\n")
		m := row.FindStringSubmatch(lines[len(lines)-1])
		if len(lines) != 2 || m == nil {
			t.Fatalf("%s is not shown on one row:\n%s", args, text)
		}
		return m[1], m[2], whole
	}
	values, keys := map[string]string{}, map[string]string{}
	for _, v := range texttest.Values(t) {
		_, value, whole := shownAs(`{"v":` + string(v) + `}`)
		if !whole {
			t.Errorf("%s is not shown whole: %s", v, value)
		}
		if bad := notPrintableASCII(value); bad != "" {
			t.Errorf("%s shows as %s, with %s", v, value, bad)
		}
		if other, ok := values[value]; ok {
			t.Errorf("%s and %s both show as %s", other, v, value)
		}
		values[value] = string(v)
		if v[0] != '"' {
			continue
		}
		key, _, whole := shownAs(`{` + string(v) + `:1}`)
		if !whole {
			continue // cut, so the message cannot approve it
		}
		if bad := notPrintableASCII(key); bad != "" {
			t.Errorf("the key %s shows as %s, with %s", v, key, bad)
		}
		if other, ok := keys[key]; ok {
			t.Errorf("the keys %s and %s both show as %s", other, v, key)
		}
		keys[key] = string(v)
	}
	if len(values) < 50 {
		t.Fatalf("only %d values: the corpus was not read", len(values))
	}
}

// notPrintableASCII describes the first character of s that is not
// printable ASCII, or what Slack would act on in a code span, or is "".
func notPrintableASCII(s string) string {
	for _, r := range s {
		if r < 0x20 || r >= 0x7f || strings.ContainsRune("`&<>", r) {
			return fmt.Sprintf("%U", r)
		}
	}
	return ""
}
