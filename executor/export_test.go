package executor

import "testing"

// SetLandlockABI makes the builds of t see a kernel with Landlock abi.
func SetLandlockABI(t testing.TB, abi int) {
	old := landlockABI
	landlockABI = func() int { return abi }
	t.Cleanup(func() { landlockABI = old })
}
