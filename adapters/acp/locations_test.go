package acp

import "testing"

// TestSameLocations: sameLocations is value equality of paths and lines,
// nil apart from empty, so locationsValue shares a conversion only for
// the same values.
func TestSameLocations(t *testing.T) {
	one, two := int64(1), int64(2)
	a := []location{{Path: "/a", Line: &one}, {Path: "/b"}}
	for _, c := range []struct {
		name string
		x, y []location
		want bool
	}{
		{"both nil", nil, nil, true},
		{"nil and empty", nil, []location{}, false},
		{"empty and empty", []location{}, []location{}, true},
		{"same slice", a, a, true},
		{"equal copy", a, []location{{Path: "/a", Line: &two}, {Path: "/b"}}[:0:0], false},
		{"equal values", a, []location{{Path: "/a", Line: new(int64(1))}, {Path: "/b"}}, true},
		{"other line", a, []location{{Path: "/a", Line: &two}, {Path: "/b"}}, false},
		{"line and none", a, []location{{Path: "/a"}, {Path: "/b"}}, false},
		{"other path", a, []location{{Path: "/a", Line: &one}, {Path: "/c"}}, false},
		{"shorter", a, a[:1], false},
	} {
		if got := sameLocations(c.x, c.y); got != c.want {
			t.Errorf("%s: sameLocations = %v, want %v", c.name, got, c.want)
		}
		if got := sameLocations(c.y, c.x); got != c.want {
			t.Errorf("%s (swapped): sameLocations = %v, want %v", c.name, got, c.want)
		}
	}
}
