package policy

import (
	"slices"

	"github.com/signoff-dev/signoff/record"
)

// cloneWindow copies w, so that no caller shares the policy's.
func cloneWindow(w *record.Window) *record.Window {
	if w == nil {
		return nil
	}
	c := *w
	c.Days = slices.Clone(w.Days)
	return &c
}
