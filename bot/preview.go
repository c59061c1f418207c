package bot

import (
	"fmt"
	"strings"

	"github.com/slack-go/slack"
)

// Preview renders Block Kit blocks as plain text for a terminal, so that
// `signoff demo` can show the message it would post without a Slack workspace.
func Preview(blocks []slack.Block) string {
	var b strings.Builder
	for _, blk := range blocks {
		switch x := blk.(type) {
		case *slack.HeaderBlock:
			fmt.Fprintf(&b, "# %s\n", textOf(x.Text))
		case *slack.SectionBlock:
			if t := textOf(x.Text); t != "" {
				fmt.Fprintf(&b, "%s\n", t)
			}
			for _, f := range x.Fields {
				fmt.Fprintf(&b, "  %s\n", strings.ReplaceAll(textOf(f), "\n", " "))
			}
		case *slack.ContextBlock:
			var parts []string
			for _, el := range x.ContextElements.Elements {
				if t, ok := el.(*slack.TextBlockObject); ok {
					parts = append(parts, t.Text)
				}
			}
			fmt.Fprintf(&b, "%s\n", strings.Join(parts, " · "))
		case *slack.DividerBlock:
			b.WriteString("────────\n")
		case *slack.ActionBlock:
			var buttons []string
			for _, el := range x.Elements.ElementSet {
				if btn, ok := el.(*slack.ButtonBlockElement); ok {
					label := "[ " + textOf(btn.Text) + " ]"
					if btn.Confirm != nil {
						label += " (asks to confirm)"
					}
					buttons = append(buttons, label)
				}
			}
			fmt.Fprintf(&b, "%s\n", strings.Join(buttons, "  "))
		}
	}
	return b.String()
}

func textOf(t *slack.TextBlockObject) string {
	if t == nil {
		return ""
	}
	return t.Text
}

// ModalView and Block name slack-go's types for callers that implement
// SlackActions without importing slack-go (only this package talks to Slack).
type (
	ModalView = slack.ModalViewRequest
	Block     = slack.Block
)
