package session

import (
	"errors"
	"reflect"
	"testing"

	"github.com/happy-dev/happy/agent"
)

func TestDecodeCommunication(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Communication
		err  string
	}{
		{`{"id":"c","kind":"form","status":"answered","answers":{"0":{"options":["a","b"]},"q":{"options":[],"custom":"free"}}}`,
			Communication{CallID: "c", Answers: map[string][]string{"0": {"a", "b"}, "q": {"free"}}}, ""},
		{`{"id":"c","kind":"form","status":"cancelled"}`, Communication{CallID: "c", Cancelled: true}, ""},
		{`{"kind":"form","status":"cancelled"}`, Communication{}, "refused control input: missing id"},
		{`{"id":"c","kind":"chat","status":"cancelled"}`, Communication{}, `refused control input: kind must be "form"`},
		{`{"id":"c","kind":"form","status":"maybe"}`, Communication{}, `refused control input: status "maybe" is not answered or cancelled`},
		{`{"id":"c","kind":"form"}`, Communication{}, "refused control input: missing status"},
		{`{"id":"c","kind":"form","status":"answered"}`, Communication{}, "refused control input: an answered form needs answers"},
		{`{"id":"c","kind":"form","status":"answered","answers":{"0":{"options":[1]}}}`, Communication{}, "refused control input: invalid_field: json: cannot unmarshal number into Go struct field .answers.options of type string"},
		{`[]`, Communication{}, "refused control input: not_an_object: params must be a JSON object"},
	} {
		got, err := DecodeCommunication([]byte(c.in))
		if c.err != "" {
			if err == nil || err.Error() != c.err || !errors.Is(err, ErrBadControl) {
				t.Errorf("%s: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v %v", c.in, got, err)
		}
	}
}

func TestOrderAnswers(t *testing.T) {
	qs := []agent.QuestionInfo{{Question: "Which colour?", Header: "Colour"}, {Question: "Which size?", Header: "Size"}}
	for _, c := range []struct {
		name string
		qs   []agent.QuestionInfo
		in   map[string][]string
		want [][]string
		err  string
	}{
		{"by position", qs, map[string][]string{"1": {"L"}, "0": {"red"}}, [][]string{{"red"}, {"L"}}, ""},
		{"by text and header", qs, map[string][]string{"Which colour?": {"red"}, "Size": {"S"}}, [][]string{{"red"}, {"S"}}, ""},
		{"one unanswered", qs, map[string][]string{"Size": {"S"}}, [][]string{{}, {"S"}}, ""},
		{"unknown", qs, map[string][]string{"Shape": {"x"}}, nil, `refused control input: no question "Shape" in this form`},
		{"position out of range", qs, map[string][]string{"2": {"x"}}, nil, `refused control input: no question "2" in this form`},
		{"questions unknown, positions", nil, map[string][]string{"0": {"a"}}, [][]string{{"a"}}, ""},
		{"questions unknown, text", nil, map[string][]string{"Which?": {"a"}}, nil, `refused control input: question id "Which?" is not a position`},
	} {
		got, err := orderAnswers(c.qs, c.in)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %q %v", c.name, got, err)
		}
	}
}

func FuzzDecodeCommunication(f *testing.F) {
	for _, s := range []string{`{"id":"c","kind":"form","status":"answered","answers":{"0":{"options":["a"],"custom":"x"}}}`,
		`{"id":"c","kind":"form","status":"cancelled"}`, `{"id":"","kind":"form"}`, `null`, `{`, `{"answers":{"0":null}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommunication(data)
		if err != nil {
			if !errors.Is(err, ErrBadControl) {
				t.Fatalf("refusal not wrapped: %v", err)
			}
			return
		}
		if c.CallID == "" || (!c.Cancelled && len(c.Answers) == 0) {
			t.Fatalf("accepted %+v from %s", c, data)
		}
		if _, err := orderAnswers(nil, c.Answers); err != nil && !errors.Is(err, ErrBadControl) {
			t.Fatalf("order refusal not wrapped: %v", err)
		}
	})
}
