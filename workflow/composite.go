package workflow

import (
	"fmt"
	"reflect"

	"github.com/signoff-dev/signoff/policy"
	"github.com/signoff-dev/signoff/record"
	"github.com/signoff-dev/signoff/workflow/internal/runtx"
)

// A composite requirement (record.Requirement) is met when its approvals
// can be given to its leaves one person per leaf. The request row keeps the
// role and count it sums up to, for what reads only those; the gate, sealed
// with every checkpoint, keeps the requirement, and what is decided here
// reads it from there. An escalated person may fill any leaf still open:
// the escalation says they may decide in place of the people named.

// requirementOf is the composite requirement of the gate's current
// request, nil for a plain role and count.
func requirementOf(g *record.Gate) *record.Requirement {
	if g == nil || g.Approval == nil {
		return nil
	}
	return g.Approval.Requirement
}

// approversOf are the people who approved request reqID, in order, as the
// requirement sees them.
func approversOf(roles *policy.Roles, decs []record.DecisionRecord, escalations []record.EscalationRecord, reqID string) []policy.Approver {
	var out []policy.Approver
	for _, d := range decs {
		if d.RequestID != reqID || d.Verdict != record.VerdictApprove {
			continue
		}
		out = append(out, approverOf(roles, escalations, reqID, d.By, d.Role, d.Role != ""))
	}
	return out
}

func approverOf(roles *policy.Roles, escalations []record.EscalationRecord, reqID, who, role string, hasRole bool) policy.Approver {
	return policy.Approver{ID: who, Role: role, HasRole: hasRole, Escalated: escalatedTo(roles, escalations, reqID, who, role, hasRole)}
}

// checkLeaf refuses someone who may fill no leaf of the requirement r at
// all (the self-approval ban and the deadline are checked beside it).
func (dc *decider) checkLeaf(l *runtx.Loaded, r *record.Requirement, req *record.ApprovalRequest, in DecideInput, role string, hasRole bool) error {
	me := approverOf(dc.roles, l.State.Escalations, req.ID, in.Approver.ID, role, hasRole)
	if policy.Fills(r, dc.roles, nil, me) {
		return nil
	}
	who := in.Approver.ID + " holds no role"
	if hasRole {
		who = fmt.Sprintf("%s is %s", in.Approver.ID, role)
	}
	return refused(record.CodeNoRole, l.Run.ID, "%s and fills no place of this approval: it needs %s", who, policy.Sentence(r))
}

// checkOpenLeaf refuses an approval that would fill no leaf still open: the
// places this person could fill are taken (one person fills one leaf).
func (dc *decider) checkOpenLeaf(l *runtx.Loaded, req *record.ApprovalRequest, in DecideInput, role string, hasRole bool) error {
	r := requirementOf(l.State.Gate)
	if r == nil || in.Verdict != record.VerdictApprove {
		return nil
	}
	before := approversOf(dc.roles, l.State.Decisions, l.State.Escalations, req.ID)
	me := approverOf(dc.roles, l.State.Escalations, req.ID, in.Approver.ID, role, hasRole)
	if policy.Fills(r, dc.roles, before, me) {
		return nil
	}
	return refused(record.CodeNoRole, l.Run.ID, "%s fills no place of this approval still open (one person fills one): still needed: %s",
		in.Approver.ID, policy.StillNeeded(r, dc.roles, before))
}

// compositeMet reports whether the request's approvals so far, this one
// included (l.State.Decisions holds it), meet its composite requirement.
func (dc *decider) compositeMet(l *runtx.Loaded, r *record.Requirement, reqID string) bool {
	return policy.Progress(r, dc.roles, approversOf(dc.roles, l.State.Decisions, l.State.Escalations, reqID)).Met
}

// editorCounts says whether an editor's approval counts for the request
// made for the edited proposal, and whether it alone approves it.
func (dc *decider) editorCounts(g *record.Gate, next *record.ApprovalRequest, in DecideInput, role string) (counts, alone bool) {
	self := in.Approver.ID != next.RequesterID || next.SelfApproval
	r := requirementOf(g)
	if r == nil {
		return self && dc.roles.AtLeast(role, next.Role), next.Count <= 1
	}
	me := []policy.Approver{{ID: in.Approver.ID, Role: role, HasRole: role != ""}}
	return self && policy.Fills(r, dc.roles, nil, me[0]), policy.Progress(r, dc.roles, me).Met
}

// mergeRequirement is the requirement of a proposal two of whose actions
// need the approvals merged and next: both, each met by its own people,
// unless they are the same. Plain approvals merge as before (the higher
// role, the larger count) and have none.
func mergeRequirement(merged *record.ApprovalSpec, prev record.ApprovalSpec, next *record.ApprovalSpec, roles *policy.Roles) {
	if prev.Requirement == nil && next.Requirement == nil {
		return
	}
	a, b := asRequirement(prev), asRequirement(*next)
	if reflect.DeepEqual(a, b) {
		merged.Requirement = &a
	} else {
		merged.Requirement = &record.Requirement{AllOf: []record.Requirement{a, b}}
	}
	merged.Role, merged.Count = policy.Summary(merged.Requirement, roles)
}

func asRequirement(a record.ApprovalSpec) record.Requirement {
	if a.Requirement != nil {
		return *a.Requirement
	}
	return record.Requirement{Role: a.Role, Count: a.Count}
}

// progressOf is how far the approvals of the view's pending request went
// towards its composite requirement; nil for a plain one.
func progressOf(roles *policy.Roles, v *RunView) *record.RequirementProgress {
	r := requirementOf(v.Gate)
	if r == nil || v.Gate.RequestID == "" {
		return nil
	}
	var decs []record.DecisionRecord
	for _, d := range v.Decisions {
		decs = append(decs, record.DecisionRecord{RequestID: d.RequestID, By: d.By, Role: d.Role, Verdict: d.Decision})
	}
	p := policy.Progress(r, roles, approversOf(roles, decs, v.Escalations, v.Gate.RequestID))
	return &p
}

// mayStillFill narrows who a reminder of a composite approval mentions to
// the people who could fill a place still open, the users its leaves name
// included; a plain approval's are kept as they are.
func mayStillFill(roles *policy.Roles, g *record.Gate, reqID string, decisions []record.DecisionRecord, escalations []record.EscalationRecord, may []string) []string {
	r := requirementOf(g)
	if r == nil {
		return may
	}
	for _, l := range policy.Leaves(r) {
		may = append(may, l.Users...)
	}
	before := approversOf(roles, decisions, escalations, reqID)
	var out []string
	for _, id := range may {
		role, ok := roles.RoleOf(id)
		if policy.Fills(r, roles, before, approverOf(roles, escalations, reqID, id, role, ok)) {
			out = append(out, id)
		}
	}
	return out
}
