package export

import "github.com/happy-dev/happy/mapper"

// ToolHead is the one-line head `happy log` prints for a tool call: the
// canonical tool name and the telling member of its input (the command,
// the path, the pattern …), e.g. `bash echo hi > hi.txt`.
func ToolHead(pt *mapper.ToolPart) string {
	head := pt.Tool
	if sum := toolSummary(pt.Tool, pt.State.Input, pt.State.Title); sum != "" {
		head += " " + sum
	}
	return head
}

// ToolSummary is ToolHead without the tool's name: the telling member of
// its input, else its title, else the names of its input's members; the
// first line only, at most 80 characters. "" when there is nothing.
func ToolSummary(pt *mapper.ToolPart) string {
	return toolSummary(pt.Tool, pt.State.Input, pt.State.Title)
}
