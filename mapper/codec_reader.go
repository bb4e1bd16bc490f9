package mapper

import (
	"encoding/json"
	"slices"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// obj is one model object being decoded, read member by member.
//
// Its accessors share one sticky error with every object opened from it
// (members, array elements): the first refusal is kept, and from then on
// every accessor does nothing and returns a zero value. A decoding
// function therefore reads its members in order, as if each accessor
// returned at once on failure, and the caller looks at the error once
// (obj.close). Nothing the decoder records (ignored members, unknown parts,
// refused records) happens after a refusal.
type obj struct {
	d    *decoder
	path string
	raw  []byte
	ms   []jsonlex.Member
	used []bool
	err  *error
}

// open starts reading raw as a model object at path, with an error of its
// own: a record that may be refused alone (a part, a message, the root).
func (d *decoder) open(raw []byte, path string) *obj {
	var rec struct {
		obj
		err error
	}
	return d.openIn(&rec.obj, raw, path, &rec.err)
}

// elem reads raw (an element of one of o's arrays) as a model object at
// path, sharing o's error.
func (o *obj) elem(raw []byte, path string) *obj { return o.d.openIn(new(obj), raw, path, o.err) }

// openIn fills o to read raw at path, recording refusals in *errp.
func (d *decoder) openIn(o *obj, raw []byte, path string, errp *error) *obj {
	*o = obj{d: d, path: path, raw: raw, err: errp}
	if *errp != nil {
		return o
	}
	if k := jsonlex.KindOf(raw); k != jsonlex.KindObject {
		o.fail(&FieldError{Path: path, Reason: agent.DropNotAnObject, Msg: "want an object, got " + k.String()})
		return o
	}
	ms, err := jsonlex.SplitObject(raw)
	if err != nil {
		o.fail(&FieldError{Path: path, Reason: agent.DropInvalidField, Msg: err.Error()})
		return o
	}
	if key, dup := repeatedKey(ms); dup {
		o.fail(invalid(joinPath(path, key), "member repeated"))
		return o
	}
	o.ms, o.used = ms, make([]bool, len(ms))
	return o
}

// repeatedKey finds a member name that occurs twice (the second
// occurrence's name), comparing pairs for small objects.
func repeatedKey(ms []jsonlex.Member) (string, bool) {
	if len(ms) <= 16 {
		for i := 1; i < len(ms); i++ {
			for j := range i {
				if ms[i].Key == ms[j].Key {
					return ms[i].Key, true
				}
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(ms))
	for _, m := range ms {
		if _, dup := seen[m.Key]; dup {
			return m.Key, true
		}
		seen[m.Key] = struct{}{}
	}
	return "", false
}

// failed reports whether a refusal was recorded.
func (o *obj) failed() bool { return *o.err != nil }

// fail records err unless a refusal was recorded already (or err is nil).
func (o *obj) fail(err error) {
	if *o.err == nil && err != nil {
		*o.err = err
	}
}

// close ends the object: without a refusal, the members nobody took are
// counted as ignored. It returns the refusal, if any.
func (o *obj) close() error {
	if *o.err != nil {
		return *o.err
	}
	for i, u := range o.used {
		if !u {
			o.d.report.IgnoredFields++
			if len(o.d.report.IgnoredPaths) < maxIgnoredPaths {
				o.d.report.IgnoredPaths = append(o.d.report.IgnoredPaths, o.at(o.ms[i].Key))
			}
		}
	}
	return nil
}

// check closes the object, then records what validate says of the value
// read, at the object's path.
func (o *obj) check(validate func() error) error {
	if o.close() == nil {
		o.fail(at(o.path, validate()))
	}
	return *o.err
}

func (o *obj) at(key string) string { return joinPath(o.path, key) }

func (o *obj) has(key string) bool {
	for _, m := range o.ms {
		if m.Key == key {
			return true
		}
	}
	return false
}

func (o *obj) take(key string) ([]byte, bool) {
	if o.failed() {
		return nil, false
	}
	for i, m := range o.ms {
		if m.Key == key {
			o.used[i] = true
			return m.Val, true
		}
	}
	return nil, false
}

func (o *obj) missing(key string) {
	o.fail(&FieldError{Path: o.at(key), Reason: agent.DropInvalidField, Msg: "missing"})
}

// value returns a member that must have the given JSON kind; false when it
// is absent or refused.
func (o *obj) value(key string, want jsonlex.Kind) ([]byte, bool) {
	raw, ok := o.take(key)
	if !ok {
		return nil, false
	}
	if k := jsonlex.KindOf(raw); k != want {
		o.fail(&FieldError{Path: o.at(key), Reason: agent.DropInvalidField, Msg: "want " + want.String() + ", got " + k.String()})
		return nil, false
	}
	return raw, true
}

// need returns a member that must be present and of the given kind.
func (o *obj) need(key string, want jsonlex.Kind) ([]byte, bool) {
	raw, ok := o.value(key, want)
	if !ok && !o.failed() {
		o.missing(key)
	}
	return raw, ok
}

// strOf unquotes a string member.
func (o *obj) strOf(key string, raw []byte) string {
	s, err := jsonlex.Unquote(raw)
	if err != nil {
		o.fail(&FieldError{Path: o.at(key), Reason: agent.DropInvalidField, Msg: err.Error()})
	}
	return s
}

// optStr is an optional string ("" when absent).
func (o *obj) optStr(key string) string {
	if raw, ok := o.value(key, jsonlex.KindString); ok {
		return o.strOf(key, raw)
	}
	return ""
}

// str is a required string.
func (o *obj) str(key string) string {
	if raw, ok := o.need(key, jsonlex.KindString); ok {
		return o.strOf(key, raw)
	}
	return ""
}

// id is a required non-empty string (reason missing_id).
func (o *obj) id(key string) string {
	raw, ok := o.value(key, jsonlex.KindString)
	if !ok {
		if !o.failed() {
			o.fail(&FieldError{Path: o.at(key), Reason: agent.DropMissingID, Msg: "missing"})
		}
		return ""
	}
	s := o.strOf(key, raw)
	if s == "" {
		o.fail(&FieldError{Path: o.at(key), Reason: agent.DropMissingID, Msg: "empty"})
	}
	return s
}

// optInt is an optional integer in int64 range (nil when absent).
func (o *obj) optInt(key string) *int64 {
	raw, ok := o.value(key, jsonlex.KindNumber)
	if !ok {
		return nil
	}
	v, err := parseInt(raw)
	if err != nil {
		o.fail(invalid(o.at(key), "%s", err))
		return nil
	}
	return &v
}

// int is a required integer.
func (o *obj) int(key string) int64 {
	v := o.optInt(key)
	if v == nil {
		if !o.failed() {
			o.missing(key)
		}
		return 0
	}
	return *v
}

// count is a required non-negative integer that fits an int32.
func (o *obj) count(key string) int {
	v := o.int(key)
	if v < 0 || v > 1<<31-1 {
		o.fail(invalid(o.at(key), "%d is out of range", v))
		return 0
	}
	return int(v)
}

// optFloat is an optional finite number (nil when absent).
func (o *obj) optFloat(key string) *float64 {
	raw, ok := o.value(key, jsonlex.KindNumber)
	if !ok {
		return nil
	}
	v, err := parseFloat(raw)
	if err != nil {
		o.fail(invalid(o.at(key), "%s", err))
		return nil
	}
	return &v
}

// optBool is an optional boolean (nil when absent).
func (o *obj) optBool(key string) *bool {
	raw, ok := o.value(key, jsonlex.KindBool)
	if !ok {
		return nil
	}
	v := raw[0] == 't'
	return &v
}

// flag is an optional boolean that is false when absent.
func (o *obj) flag(key string) bool {
	v := o.optBool(key)
	return v != nil && *v
}

// bool is a required boolean.
func (o *obj) bool(key string) bool {
	if raw, ok := o.need(key, jsonlex.KindBool); ok {
		return raw[0] == 't'
	}
	return false
}

// sub returns a required member that is a model object; on a refusal the
// object returned reads nothing.
func (o *obj) sub(key string) *obj {
	raw, _ := o.need(key, jsonlex.KindObject)
	return o.elem(raw, o.at(key))
}

// optSub returns an optional member that is a model object, nil when it
// is absent or refused.
func (o *obj) optSub(key string) *obj {
	raw, ok := o.value(key, jsonlex.KindObject)
	if !ok {
		return nil
	}
	s := o.elem(raw, o.at(key))
	if o.failed() {
		return nil
	}
	return s
}

// free returns an optional member that is a free-form object (tool input,
// metadata); nil when absent.
func (o *obj) free(key string) agent.Object {
	raw, ok := o.value(key, jsonlex.KindObject)
	return o.freeOf(key, raw, ok)
}

// reqFree is a required free-form object.
func (o *obj) reqFree(key string) agent.Object {
	raw, ok := o.need(key, jsonlex.KindObject)
	return o.freeOf(key, raw, ok)
}

func (o *obj) freeOf(key string, raw []byte, ok bool) agent.Object {
	if !ok {
		return nil
	}
	v, err := jsonlex.ParseAny(raw)
	if err != nil {
		o.fail(invalid(o.at(key), "%s", err))
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		o.fail(invalid(o.at(key), "want an object, got %T", v))
		return nil
	}
	return m
}

// opaque returns a member kept as canonical raw JSON (any type but null);
// nil when absent.
func (o *obj) opaque(key string) json.RawMessage {
	raw, ok := o.take(key)
	if !ok {
		return nil
	}
	if jsonlex.KindOf(raw) == jsonlex.KindNull {
		o.fail(invalid(o.at(key), "null is not a value here; omit the member"))
		return nil
	}
	var e encoder
	if err := e.raw(raw); err != nil {
		o.fail(invalid(o.at(key), "%s", err))
		return nil
	}
	return json.RawMessage(e.buf)
}

// array returns the elements of an optional array member; false when it
// is absent or refused.
func (o *obj) array(key string) ([][]byte, bool) {
	raw, ok := o.value(key, jsonlex.KindArray)
	if !ok {
		return nil, false
	}
	return o.elements(o.at(key), raw)
}

func (o *obj) elements(path string, raw []byte) ([][]byte, bool) {
	els, err := jsonlex.SplitArray(raw)
	if err != nil {
		o.fail(invalid(path, "%s", err))
		return nil, false
	}
	return els, true
}

// reqArray returns the elements of a required array member.
func (o *obj) reqArray(key string) [][]byte {
	els, ok := o.array(key)
	if !ok && !o.failed() {
		o.missing(key)
	}
	return els
}

// each calls fn with every element of the required array member key and
// the element's path, while nothing was refused.
func (o *obj) each(key string, fn func(el []byte, path string)) {
	o.eachOf(o.at(key), o.reqArray(key), fn)
}

// eachOpt is each for an optional array; it reports whether the member is
// there.
func (o *obj) eachOpt(key string, fn func(el []byte, path string)) bool {
	els, ok := o.array(key)
	o.eachOf(o.at(key), els, fn)
	return ok
}

func (o *obj) eachOf(path string, els [][]byte, fn func(el []byte, path string)) {
	for i, el := range els {
		if o.failed() {
			return
		}
		fn(el, joinPath(path, indexPath(i)))
	}
}

// strList decodes an optional array of strings (non-nil when present).
func (o *obj) strList(key string) ([]string, bool) {
	els, ok := o.array(key)
	if !ok {
		return nil, false
	}
	return o.strings(o.at(key), els), true
}

// reqStrList is a required array of strings.
func (o *obj) reqStrList(key string) []string {
	v, ok := o.strList(key)
	if !ok && !o.failed() {
		o.missing(key)
	}
	return v
}

// strings decodes array elements that must be strings.
func (o *obj) strings(path string, els [][]byte) []string {
	out := make([]string, len(els))
	for i, el := range els {
		if k := jsonlex.KindOf(el); k != jsonlex.KindString {
			o.fail(invalid(joinPath(path, indexPath(i)), "want a string, got %s", k))
			return nil
		}
		s, err := jsonlex.Unquote(el)
		if err != nil {
			o.fail(invalid(joinPath(path, indexPath(i)), "%s", err))
			return nil
		}
		out[i] = s
	}
	return out
}

// refuseKeys refuses members that belong to the model but not to this
// variant.
func (o *obj) refuseKeys(what string, keys ...string) {
	for _, k := range keys {
		if o.has(k) {
			o.fail(invalid(o.at(k), "%s has no %s", what, k))
			return
		}
	}
}

// onlyKeys refuses the first of all that is present but not in allowed.
func (o *obj) onlyKeys(what string, all, allowed []string) {
	for _, k := range all {
		if o.has(k) && !slices.Contains(allowed, k) {
			o.fail(invalid(o.at(k), "%s has no %s", what, k))
			return
		}
	}
}

// boolMap decodes an optional object whose every value is a boolean.
func (o *obj) boolMap(key string) map[string]bool {
	m := o.free(key)
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(map[string]bool, len(m))
	for _, k := range keys {
		b, ok := m[k].(bool)
		if !ok {
			o.fail(invalid(joinPath(o.at(key), k), "want a boolean"))
			return nil
		}
		out[k] = b
	}
	return out
}
