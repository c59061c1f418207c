package slackdev

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/signoff-dev/signoff/bot"
	"github.com/signoff-dev/signoff/bot/fakeslack"
)

// block is the part of a Block Kit block that Render reads.
type block struct {
	Type     string    `json:"type"`
	BlockID  string    `json:"block_id"`
	Text     *textObj  `json:"text"`
	Fields   []textObj `json:"fields"`
	Elements []element `json:"elements"`
	Label    *textObj  `json:"label"`
	Element  *element  `json:"element"`
	AltText  string    `json:"alt_text"`
}

type textObj struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// element is a block element: a button, a context's text or image, an input.
type element struct {
	Type         string          `json:"type"`
	Text         json.RawMessage `json:"text"` // an object for a button, a string for a context's text
	ActionID     string          `json:"action_id"`
	Value        string          `json:"value"`
	Style        string          `json:"style"`
	Confirm      json.RawMessage `json:"confirm"`
	AltText      string          `json:"alt_text"`
	InitialValue *string         `json:"initial_value"`
}

// label is what an element shows: a button's text, a context element's.
func (e element) label() string {
	var o textObj
	if json.Unmarshal(e.Text, &o) == nil && o.Text != "" {
		return o.Text
	}
	var s string
	if json.Unmarshal(e.Text, &s) == nil {
		return s
	}
	return e.AltText
}

func parseBlocks(raw string) ([]block, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var bs []block
	if err := json.Unmarshal([]byte(raw), &bs); err != nil {
		return nil, fmt.Errorf("blocks are not Block Kit JSON: %w", err)
	}
	return bs, nil
}

// Render turns the JSON of Block Kit blocks into plain lines, as a person
// reads them in Slack: headers and sections as their text, fields one after
// another, context elements on one line, buttons as [Label], inputs as
// "label: value". fallback (the message's text) is shown when there are no
// blocks, and blocks that are not JSON show as such.
func Render(blocksJSON, fallback string) []string {
	bs, err := parseBlocks(blocksJSON)
	if err != nil {
		return []string{"(" + err.Error() + ")"}
	}
	if len(bs) == 0 {
		return splitLines(plain(fallback))
	}
	var out []string
	for _, b := range bs {
		out = append(out, renderBlock(b)...)
	}
	return out
}

func renderBlock(b block) []string {
	var out []string
	switch b.Type {
	case "header":
		if b.Text != nil {
			out = append(out, splitLines(plain(b.Text.Text))...)
		}
	case "section":
		if b.Text != nil {
			out = append(out, splitLines(plain(b.Text.Text))...)
		}
		for _, f := range b.Fields {
			out = append(out, splitLines(plain(f.Text))...)
		}
	case "context":
		var parts []string
		for _, e := range b.Elements {
			parts = append(parts, plain(e.label()))
		}
		out = append(out, splitLines(strings.Join(parts, " · "))...)
	case "actions":
		var parts []string
		for _, e := range b.Elements {
			if e.Type == "button" {
				parts = append(parts, "["+e.label()+"]")
			} else {
				parts = append(parts, "("+e.Type+")")
			}
		}
		line := "buttons: " + strings.Join(parts, " ")
		if run := buttonsRun(b); run != "" {
			line += "    signoff slack click " + run + " approve|reject|edit --as USER"
		}
		out = append(out, line)
	case "input":
		label := ""
		if b.Label != nil {
			label = b.Label.Text
		}
		value := ""
		if b.Element != nil && b.Element.InitialValue != nil {
			value = *b.Element.InitialValue
		}
		head := label + " [input " + b.BlockID + "]"
		lines := splitLines(value)
		if len(lines) <= 1 {
			out = append(out, strings.TrimSuffix(head+": "+value, ": "))
			break
		}
		out = append(out, head+":")
		for _, l := range lines {
			out = append(out, "  "+l)
		}
	case "divider":
		out = append(out, "---")
	case "image":
		out = append(out, "[image: "+b.AltText+"]")
	default:
		out = append(out, "("+b.Type+" block)")
	}
	return out
}

// buttonsRun is the run signoff's decision buttons of b are for, "" when they are not.
func buttonsRun(b block) string {
	for _, e := range b.Elements {
		if ref, err := bot.ParseRef(e.Value); err == nil {
			return ref.RunID
		}
	}
	return ""
}

var (
	mention  = regexp.MustCompile(`<@([A-Z0-9]+)(?:\|([^>]*))?>`)
	special  = regexp.MustCompile(`<!(here|channel|everyone)(?:\|[^>]*)?>`)
	date     = regexp.MustCompile(`<!date\^[^|>]*\|([^>]*)>`)
	link     = regexp.MustCompile(`<((?:https?|mailto):[^|>]*)\|([^>]*)>`)
	bareLink = regexp.MustCompile(`<((?:https?|mailto):[^>]*)>`)
)

// plain reads mrkdwn as Slack shows it: mentions as @id (or @name), dates as
// their fallback text, links as "text (url)", and &lt; &gt; &amp; as the
// characters. Bold, italics and code marks are left: they read well as they are.
func plain(md string) string {
	s := mention.ReplaceAllStringFunc(md, func(m string) string {
		g := mention.FindStringSubmatch(m)
		if g[2] != "" {
			return "@" + g[2]
		}
		return "@" + g[1]
	})
	s = special.ReplaceAllString(s, "@$1")
	s = date.ReplaceAllString(s, "$1")
	s = link.ReplaceAllString(s, "$2 ($1)")
	s = bareLink.ReplaceAllString(s, "$1")
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// WriteEvent prints one event of the local Slack: a heading line that says
// what happened and where, the message (or modal) as Render shows it, each
// line indented, and a blank line.
func WriteEvent(w io.Writer, ev fakeslack.Event) {
	var head string
	var lines []string
	switch ev.Kind {
	case fakeslack.Posted, fakeslack.Updated:
		m := ev.Message
		head = fmt.Sprintf("%s %s ts %s", ev.Kind, m.Channel, m.TS)
		if ev.Kind == fakeslack.Updated {
			head += fmt.Sprintf(" (update %d)", m.Updates)
		}
		lines = Render(m.Blocks, m.Text)
	case fakeslack.EphemeralSent:
		e := ev.Ephemeral
		head = fmt.Sprintf("ephemeral %s to %s (only they see it)", e.Channel, e.User)
		lines = Render(e.Blocks, e.Text)
	case fakeslack.ViewOpened:
		v, err := parseView(ev.View.View)
		if err != nil {
			head, lines = "modal "+ev.View.ID, []string{"(" + err.Error() + ")"}
			break
		}
		head = fmt.Sprintf("modal %s %q opened (submit: %s)", ev.View.ID, text(v.Title), text(v.Submit))
		lines = Render(string(v.Blocks), "")
	default:
		head = ev.Kind
	}
	var b strings.Builder
	b.WriteString(head + "\n")
	for _, l := range lines {
		b.WriteString("    " + l + "\n")
	}
	b.WriteString("\n")
	_, _ = io.WriteString(w, b.String())
}
