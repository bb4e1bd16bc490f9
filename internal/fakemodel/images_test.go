package fakemodel

import (
	"reflect"
	"testing"
)

func TestAnthropicRequestImages(t *testing.T) {
	_, r, err := parseAnthropic([]byte(`{"model":"m","messages":[
		{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lG"}}]},
		{"role":"assistant","content":[]},
		{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}},{"type":"text","text":"what is this?"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Image{{MediaType: "image/png", Data: []byte("\x89PNG")}}
	if r.LastText != "what is this?" || !reflect.DeepEqual(r.Images, want) {
		t.Fatalf("LastText %q Images %+v, want %+v", r.LastText, r.Images, want)
	}
}
