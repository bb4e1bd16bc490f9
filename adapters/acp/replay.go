package acp

import (
	"fmt"
	"io"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/agent"
)

// Replay decodes a recorded ACP traffic log (as written by --record, or a
// capture in the same format) into agent events, in order: happy's prompts
// and permission answers are read from the traffic (and from the client's
// notes). Bad lines are DroppedInput events at their place; a turn still
// open at the end of the log ends as truncated (Decoder.Finish). The caller
// reduces the events to a transcript (`happy replay --agent acp FILE`).
// Errors: a read error of r only.
func Replay(r io.Reader) ([]agent.Event, error) {
	tr, err := jsonrpc.ReadTraffic(r)
	if err != nil {
		return nil, fmt.Errorf("acp: %w", err)
	}
	dec := NewDecoder()
	return append(tr.Decode(dec.Decode), dec.Finish()...), nil
}
