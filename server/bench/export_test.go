package bench

import "time"

// SetEndGrace sets endGrace for a test and returns a function that puts
// it back.
func SetEndGrace(d time.Duration) func() {
	old := endGrace
	endGrace = d
	return func() { endGrace = old }
}
