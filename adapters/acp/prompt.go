package acp

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/happy-dev/happy/agent"
)

// Prompt is one user prompt: text and attachments (data:, file:// or
// http(s) URLs).
type Prompt struct {
	Text  string
	Files []agent.PromptFile
}

// promptBlocks builds the content of session/prompt: the text, and each
// attachment as an image, audio or embedded resource (data: URLs; only
// when the agent takes them) or a resource link (file://, http(s)://).
func promptBlocks(p Prompt, info AgentInfo) ([]map[string]any, error) {
	var blocks []map[string]any
	if p.Text != "" || len(p.Files) == 0 {
		blocks = append(blocks, map[string]any{"type": "text", "text": p.Text})
	}
	for _, f := range p.Files {
		if mime, data, ok := parseDataURL(f.URL); ok {
			if f.Mime != "" {
				mime = f.Mime
			}
			switch {
			case strings.HasPrefix(mime, "image/") && info.Image:
				blocks = append(blocks, map[string]any{"type": "image", "data": data, "mimeType": mime})
			case strings.HasPrefix(mime, "audio/") && info.Audio:
				blocks = append(blocks, map[string]any{"type": "audio", "data": data, "mimeType": mime})
			case info.EmbeddedContext:
				name := f.Filename
				if name == "" {
					name = "attachment"
				}
				res := map[string]any{"uri": "attachment:///" + url.PathEscape(name), "mimeType": mime}
				if text, err := base64.StdEncoding.DecodeString(data); err == nil && isText(mime, text) {
					res["text"] = string(text)
				} else {
					res["blob"] = data
				}
				blocks = append(blocks, map[string]any{"type": "resource", "resource": res})
			default:
				return nil, fmt.Errorf("%w: %w: attachment %q (%s): the agent's promptCapabilities allow no %s content", ErrUnsupported, agent.ErrUnsupportedInput, f.Filename, mime, kindOf(mime))
			}
			continue
		}
		u, err := url.Parse(f.URL)
		if err != nil || (u.Scheme != "file" && u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("%w: %w: attachment URL %q", ErrUnsupported, agent.ErrUnsupportedInput, f.URL)
		}
		name := f.Filename
		if name == "" {
			name = path.Base(u.Path)
		}
		link := map[string]any{"type": "resource_link", "uri": f.URL, "name": name}
		if f.Mime != "" {
			link["mimeType"] = f.Mime
		}
		blocks = append(blocks, link)
	}
	return blocks, nil
}

// kindOf names the prompt capability a type needs.
func kindOf(mime string) string {
	switch {
	case strings.HasPrefix(mime, "image/"):
		return "image (or embedded resource)"
	case strings.HasPrefix(mime, "audio/"):
		return "audio (or embedded resource)"
	}
	return "embedded resource"
}

// isText reports whether an attachment can travel as a text resource.
func isText(mime string, b []byte) bool {
	return (strings.HasPrefix(mime, "text/") || mime == "application/json") && utf8.Valid(b)
}

// parseDataURL splits data:<mime>;base64,<data>.
func parseDataURL(u string) (mime, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return "", "", false
	}
	return strings.TrimSuffix(meta, ";base64"), data, true
}
