package record

import "fmt"

// IntegrityError says that a run's stored data failed a check: its
// checkpoint chain, a seal, its audit log. The engine's checks of the chain,
// of the seals and of a whole store all name what they found with it, and
// the edges match it (errors.As) to stop the run and show why.
type IntegrityError struct {
	RunID   string
	Seq     int64
	Problem string
}

func (e *IntegrityError) Error() string {
	if e.Seq > 0 {
		return fmt.Sprintf("run %s checkpoint %d: %s", e.RunID, e.Seq, e.Problem)
	}
	return fmt.Sprintf("run %s: %s", e.RunID, e.Problem)
}
