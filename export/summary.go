package export

import "github.com/happy-dev/happy/mapper"

// ToolHead is the one-line head `happy log` prints for a tool call: the
// tool name and its most telling input field (the command, the path, the
// pattern …), e.g. `bash "echo hi > hi.txt"`.
func ToolHead(pt *mapper.ToolPart) string {
	label := pt.State.Title
	if label == "" {
		label = pt.Tool
	}
	head := pt.Tool
	if sum := inputSummary(pt.State.Input, label); sum != "" {
		head += " " + sum
	}
	return head
}
