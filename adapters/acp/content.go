package acp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/happy-dev/happy/agent"
)

// Content blocks (schema ContentBlock): text, image, audio, resource_link,
// resource. Text is what agents stream; the others are rendered as
// Markdown when they appear in agent output (the transcript has text,
// reasoning and tool parts for an assistant, no file part) and become
// prompt files when they appear in user input.

// errUnknownContent marks a content block of a type the schema does not
// have; callers drop it as unknown_type rather than invalid_field.
var errUnknownContent = errors.New("unknown content type")

type resourceContents struct {
	URI      *string `json:"uri"`
	Text     *string `json:"text"`
	Blob     *string `json:"blob"`
	MimeType *string `json:"mimeType"`
}

// contentBlock is one ACP ContentBlock as read from the wire.
type contentBlock struct {
	Type     string
	Text     string
	Data     string // image, audio: base64
	MimeType string
	URI      string
	Name     string // resource_link
	Title    string // resource_link
	Size     *int64 // resource_link
	Blob     bool   // resource: blob contents (Text is empty)
}

// blockWire is a ContentBlock's members as json.Unmarshal reads them.
type blockWire struct {
	Type     *string           `json:"type"`
	Text     *string           `json:"text"`
	Data     *string           `json:"data"`
	MimeType *string           `json:"mimeType"`
	URI      *string           `json:"uri"`
	Name     *string           `json:"name"`
	Title    *string           `json:"title"`
	Size     *int64            `json:"size"`
	Resource *resourceContents `json:"resource"`
}

// decodeBlock reads a ContentBlock, checking the members its type
// requires. Errors wrap errUnknownContent for a type the schema does not
// know; anything else is an invalid block.
func decodeBlock(raw json.RawMessage) (contentBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return contentBlock{}, errors.New("content block is not an object")
	}
	var w blockWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return contentBlock{}, fmt.Errorf("content block: %w", err)
	}
	return blockOf(&w)
}

// blockOf checks a block's members (see decodeBlock).
func blockOf(w *blockWire) (contentBlock, error) {
	if w.Type == nil {
		return contentBlock{}, errors.New("content block without type")
	}
	b := contentBlock{Type: *w.Type}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	switch b.Type {
	case "text":
		if w.Text == nil {
			return b, errors.New("text block without text")
		}
		b.Text = *w.Text
	case "image", "audio":
		if w.Data == nil || w.MimeType == nil {
			return b, fmt.Errorf("%s block needs data and mimeType", b.Type)
		}
		b.Data, b.MimeType, b.URI = *w.Data, *w.MimeType, str(w.URI)
	case "resource_link":
		if w.URI == nil || w.Name == nil {
			return b, errors.New("resource_link block needs uri and name")
		}
		b.URI, b.Name, b.Title, b.MimeType = *w.URI, *w.Name, str(w.Title), str(w.MimeType)
		if w.Size != nil {
			// A pointer of the block's own: w's values may be its
			// reader's (on its stack).
			n := *w.Size
			b.Size = &n
		}
	case "resource":
		r := w.Resource
		if r == nil || r.URI == nil || (r.Text == nil) == (r.Blob == nil) {
			return b, errors.New("resource block needs resource {uri, and text or blob}")
		}
		b.URI, b.MimeType = *r.URI, str(r.MimeType)
		if r.Text != nil {
			b.Text = *r.Text
		} else {
			b.Blob, b.Data = true, *r.Blob
		}
	default:
		return b, fmt.Errorf("%w %q", errUnknownContent, b.Type)
	}
	return b, nil
}

// dataURL renders base64 data as a data: URL.
func dataURL(mime, data string) string {
	if mime == "" {
		mime = "application/octet-stream"
	}
	return "data:" + mime + ";base64," + data
}

// markdown renders a block for an assistant text or reasoning part.
func (b contentBlock) markdown() string {
	switch b.Type {
	case "text":
		return b.Text
	case "image":
		src := b.URI
		if src == "" {
			src = dataURL(b.MimeType, b.Data)
		}
		return "![" + b.MimeType + "](" + src + ")"
	case "audio":
		return fmt.Sprintf("[audio %s, %d bytes]", b.MimeType, base64.StdEncoding.DecodedLen(len(b.Data)))
	case "resource_link":
		label := b.Title
		if label == "" {
			label = b.Name
		}
		return "[" + label + "](" + b.URI + ")"
	case "resource":
		if b.Blob {
			return "[" + b.URI + "](" + b.URI + ")"
		}
		return "\n```" + " " + b.URI + "\n" + strings.TrimSuffix(b.Text, "\n") + "\n```\n"
	}
	return ""
}

// promptFile renders a non-text block of user input as a prompt file.
func (b contentBlock) promptFile() (agent.PromptFile, bool) {
	switch b.Type {
	case "image", "audio":
		url := b.URI
		if url == "" {
			url = dataURL(b.MimeType, b.Data)
		}
		return agent.PromptFile{Mime: b.MimeType, URL: url}, true
	case "resource_link":
		return agent.PromptFile{Mime: b.MimeType, Filename: b.Name, URL: b.URI}, true
	case "resource":
		if b.Blob {
			return agent.PromptFile{Mime: b.MimeType, Filename: baseName(b.URI), URL: dataURL(b.MimeType, b.Data)}, true
		}
		mime := b.MimeType
		if mime == "" {
			mime = "text/plain"
		}
		return agent.PromptFile{Mime: mime, Filename: baseName(b.URI),
			URL: dataURL(mime, base64.StdEncoding.EncodeToString([]byte(b.Text)))}, true
	}
	return agent.PromptFile{}, false
}

func baseName(uri string) string {
	if i := strings.LastIndexByte(uri, '/'); i >= 0 && i < len(uri)-1 {
		return uri[i+1:]
	}
	return uri
}

// toolContent is one ToolCallContent item: content (a block), diff or
// terminal.
type toolContent struct {
	Type       string
	Block      contentBlock
	Path       string
	OldText    *string
	NewText    string
	TerminalID string
}

// toolWire is a ToolCallContent item's members as json.Unmarshal reads
// them.
type toolWire struct {
	Type       *string         `json:"type"`
	Content    json.RawMessage `json:"content"`
	Path       *string         `json:"path"`
	OldText    *string         `json:"oldText"`
	NewText    *string         `json:"newText"`
	TerminalID *string         `json:"terminalId"`
}

// decodeToolContent reads a ToolCallContent item. Errors wrap
// errUnknownContent for an unknown type.
func decodeToolContent(raw json.RawMessage) (toolContent, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return toolContent{}, errors.New("tool content is not an object")
	}
	var w toolWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return toolContent{}, fmt.Errorf("tool content: %w", err)
	}
	return toolContentOf(&w, w.Content, decodeBlock)
}

// toolContentOf checks an item's members (see decodeToolContent), its
// block read with block.
func toolContentOf(w *toolWire, content json.RawMessage, block func(json.RawMessage) (contentBlock, error)) (toolContent, error) {
	if w.Type == nil {
		return toolContent{}, errors.New("tool content without type")
	}
	c := toolContent{Type: *w.Type}
	switch c.Type {
	case "content":
		b, err := block(content) // w.Content, apart: w's values do not go to block
		if err != nil {
			return c, err
		}
		c.Block = b
	case "diff":
		if w.Path == nil || w.NewText == nil {
			return c, errors.New("diff needs path and newText")
		}
		c.Path, c.NewText = *w.Path, *w.NewText
		if w.OldText != nil {
			// A pointer of the item's own: w's strings may be its
			// reader's (on its stack).
			old := *w.OldText
			c.OldText = &old
		}
	case "terminal":
		if w.TerminalID == nil {
			return c, errors.New("terminal content needs terminalId")
		}
		c.TerminalID = *w.TerminalID
	default:
		return c, fmt.Errorf("%w %q", errUnknownContent, c.Type)
	}
	return c, nil
}
