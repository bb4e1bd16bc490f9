package acp

import (
	"strings"
	"testing"
)

// A tool call update's image and blob resource content are the completed
// tool's files (the runner stores them as blobs).
func TestDecoderToolAttachments(t *testing.T) {
	lines := append(append([]string{}, opened...),
		upd(`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Read shot.png","kind":"read","status":"pending","rawInput":{"path":"/w/shot.png"}}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed","content":[{"type":"content","content":{"type":"image","data":"iVBO","mimeType":"image/png"}},{"type":"content","content":{"type":"resource","resource":{"uri":"file:///w/a.pdf","mimeType":"application/pdf","blob":"JVBE"}}}]}`))
	got := eventLines(t, decodeAll(script(lines...)))
	want := `"files":[{"mime":"image/png","url":"data:image/png;base64,iVBO"},{"mime":"application/pdf","filename":"a.pdf","url":"data:application/pdf;base64,JVBE"}]`
	if !strings.Contains(got, want) {
		t.Fatalf("events:\n%s\nwant a ToolCompleted with %s", got, want)
	}
}
