package bot

import (
	"fmt"
	"strings"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// whoMayApproveComposite is "Who may approve" for a composite approval:
// the requirement in words, then each place and who fills it, e.g.
// "team_lead ✓ <@U…> · manager: waiting".
func whoMayApproveComposite(v *workflow.RunView, g *record.Gate) string {
	a := g.Approval
	var b strings.Builder
	b.WriteString("*" + mdEscape(policy.Sentence(a.Requirement)) + "*")
	if !a.SelfApproval {
		b.WriteString(" · not the requester")
	}
	if a.Edit {
		b.WriteString(" · may edit")
	}
	if g.Assignee != "" {
		b.WriteString("\nAssigned to " + mdMention(g.Assignee, ""))
	}
	if v.Progress == nil {
		return b.String()
	}
	parts := make([]string, 0, len(v.Progress.Leaves))
	for i, l := range v.Progress.Leaves {
		if i == maxMentions {
			parts = append(parts, fmt.Sprintf("and %d more", len(v.Progress.Leaves)-maxMentions))
			break
		}
		parts = append(parts, leafProgress(l))
	}
	b.WriteString("\n" + strings.Join(parts, " · "))
	return b.String()
}

func leafProgress(l record.LeafFill) string {
	label := mdEscape(policy.LeafLabel(l))
	if len(l.Users) > 0 {
		users := make([]string, len(l.Users))
		for i, u := range l.Users {
			users[i] = mdMention(u, "")
		}
		label = strings.Join(users, " or ")
	}
	var by []string
	for _, id := range l.By {
		by = append(by, mdMention(id, ""))
	}
	open := policy.Open(l)
	switch {
	case open == 0:
		return label + " ✓ " + strings.Join(by, " ")
	case len(by) > 0:
		return fmt.Sprintf("%s ✓ %s, %d more: waiting", label, strings.Join(by, " "), open)
	}
	return label + ": waiting"
}

// precheckComposite is precheckRole for a composite approval: someone who
// could fill none of its places is told so before a form opens.
func precheckComposite(roles *policy.Roles, r *record.Requirement, userID, role string, hasRole bool) string {
	if policy.Fills(r, roles, nil, policy.Approver{ID: userID, Role: role, HasRole: hasRole}) {
		return ""
	}
	return "Nothing changed: you fill no place of this approval; it needs " + mdEscape(policy.Sentence(r)) + "."
}
