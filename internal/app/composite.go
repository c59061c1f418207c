package app

import (
	"fmt"
	"io"
	"strings"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow"
)

// renderComposite prints a composite approval: the requirement in words
// and, for each leaf, who fills it or that it waits.
func renderComposite(w io.Writer, v *workflow.RunView, a *record.ApprovalSpec) {
	fmt.Fprintf(w, "  approval: %s", term(policy.Sentence(a.Requirement)))
	if !a.SelfApproval {
		fmt.Fprint(w, "; not the requester")
	}
	if a.Edit {
		fmt.Fprint(w, "; may edit")
	}
	fmt.Fprintln(w)
	if v.Progress == nil {
		return
	}
	for _, l := range v.Progress.Leaves {
		fmt.Fprintf(w, "    %s: %s\n", term(policy.LeafLabel(l)), term(leafState(l)))
	}
}

func leafState(l record.LeafFill) string {
	parts := append([]string(nil), l.By...)
	switch open := policy.Open(l); {
	case open > 0 && len(parts) > 0:
		parts = append(parts, fmt.Sprintf("waiting for %d more", open))
	case open > 0:
		parts = append(parts, "waiting")
	}
	return strings.Join(parts, ", ")
}
