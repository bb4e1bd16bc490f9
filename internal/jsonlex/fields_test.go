package jsonlex

import (
	"encoding/json"
	"testing"
)

// The field decoders fill a field as json.Unmarshal does, or say the value
// must go to encoding/json (a type the field cannot take).
func TestFieldDecoders(t *testing.T) {
	for _, v := range []string{`"plain"`, `"esc\n\u00e9"`, `""`, `null`, `true`, `false`, `12`, `{}`, `[]`, `"bad \x"`} {
		t.Run(v, func(t *testing.T) {
			var s, ws string = "kept", "kept"
			ok := SetString([]byte(v), &s)
			werr := json.Unmarshal([]byte(v), &ws)
			if ok != (werr == nil) || (ok && s != ws) {
				t.Errorf("SetString: %q %v, encoding/json %q %v", s, ok, ws, werr)
			}
			old := "kept"
			sp, wsp := &old, &old
			ok = SetStringPtr([]byte(v), &sp)
			werr = json.Unmarshal([]byte(v), &wsp)
			if ok != (werr == nil) || (ok && (sp == nil) != (wsp == nil)) || (ok && sp != nil && *sp != *wsp) {
				t.Errorf("SetStringPtr: %v %v, encoding/json %v %v", sp, ok, wsp, werr)
			}
			b, wb := true, true
			ok = SetBool([]byte(v), &b)
			werr = json.Unmarshal([]byte(v), &wb)
			if ok != (werr == nil) || (ok && b != wb) {
				t.Errorf("SetBool: %v %v, encoding/json %v %v", b, ok, wb, werr)
			}
			tr := true
			bp, wbp := &tr, &tr
			ok = SetBoolPtr([]byte(v), &bp)
			werr = json.Unmarshal([]byte(v), &wbp)
			if ok != (werr == nil) || (ok && (bp == nil) != (wbp == nil)) || (ok && bp != nil && *bp != *wbp) {
				t.Errorf("SetBoolPtr: %v %v, encoding/json %v %v", bp, ok, wbp, werr)
			}
		})
	}
}
