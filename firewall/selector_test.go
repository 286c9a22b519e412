package firewall

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/internal/jsonpointer"
)

func TestParseSelector(t *testing.T) {
	tests := []struct {
		in   string
		want Selector
	}{
		{`{"type":"head"}`, Selector{Type: SelHead}},
		{`{"type":"head","chars":10}`, Selector{Type: SelHead, Chars: 10}},
		{`{"type":"lines","start":-1}`, Selector{Type: SelLines, Start: -1}},
		{`{"type":"lines","start":3,"end":9}`, Selector{Type: SelLines, Start: 3, End: 9}},
		{`{"type":"lines","start":-20,"end":-1}`, Selector{Type: SelLines, Start: -20, End: -1}},
		{`{"type":"lines","start":-20,"end":5}`, Selector{Type: SelLines, Start: -20, End: 5}},
		{`{"type":"bytes","offset":0,"length":1}`, Selector{Type: SelBytes, Length: 1}},
		{` {"offset":9,"type":"bytes"} `, Selector{Type: SelBytes, Offset: 9}},
		{`{"type":"json_pointer","pointer":""}`, Selector{Type: SelJSONPointer}},
		{`{"type":"json_pointer","pointer":"/a~1b/~0/0"}`, Selector{Type: SelJSONPointer, Pointer: "/a~1b/~0/0"}},
		{`{"type":"json_keys","keys":["a","b"]}`, Selector{Type: SelJSONKeys, Keys: []string{"a", "b"}}},
		{`{"type":"json_keys","keys":["a"],"pointer":"/x"}`, Selector{Type: SelJSONKeys, Keys: []string{"a"}, Pointer: "/x"}},
		{`{"type":"grep","pattern":"ERROR|WARN"}`, Selector{Type: SelGrep, Pattern: "ERROR|WARN"}},
		{`{"type":"grep","pattern":"x","max_matches":200,"start":7}`, Selector{Type: SelGrep, Pattern: "x", MaxMatches: 200, Start: 7}},
		{`{"type":"rows","start":1,"end":20}`, Selector{Type: SelRows, Start: 1, End: 20}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSelector(json.RawMessage(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			// Canonical JSON round-trips.
			again, err := ParseSelector(got.raw())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip %s: %+v, %v", got.raw(), again, err)
			}
		})
	}
}

func TestParseSelectorErrors(t *testing.T) {
	long := strings.Repeat("a", MaxPatternBytes+1)
	tests := []struct{ in, want string }{
		{``, "not valid JSON"},
		{`[]`, "must be a JSON object"},
		{`"head"`, "must be a JSON object"},
		{`{"type":"head"} {}`, "trailing data"},
		{`{"type":"head",}`, "not valid JSON"},
		{`{}`, `missing "type"`},
		{`{"type":7}`, `"type" must be a string`},
		{`{"type":"tail"}`, `unknown type "tail"`},
		{`{"type":"head","type":"head"}`, `duplicate field "type"`},
		{`{"type":"head","start":1}`, `head: unknown field "start" (allowed: chars)`},
		{`{"type":"lines","chars":1}`, `unknown field "chars"`},
		{`{"type":"head","chars":0}`, "chars must be at least 1"},
		{`{"type":"head","chars":-4}`, "chars must be between 1 and"},
		{`{"type":"head","chars":1.5}`, "chars must be an integer"},
		{`{"type":"head","chars":"10"}`, "chars must be an integer"},
		{`{"type":"head","chars":1e3}`, "chars must be an integer"},
		{`{"type":"head","chars":null}`, "chars must be an integer"},
		{`{"type":"head","chars":99999999999999999999}`, "out of range"},
		{`{"type":"head","chars":2000000}`, "chars must be between"},
		{`{"type":"lines","start":0}`, "start must not be 0"},
		{`{"type":"lines","end":0}`, "end must not be 0"},
		{`{"type":"lines","start":10,"end":3}`, "end (3) before start (10)"},
		{`{"type":"lines","start":2199023255553}`, "within ±"},
		{`{"type":"rows","start":5,"end":4}`, "rows: end (4) before start (5)"},
		{`{"type":"bytes","offset":-1}`, "offset must not be negative"},
		{`{"type":"bytes","length":0}`, "length must be at least 1"},
		{`{"type":"bytes","length":1048577}`, "length must be between 1 and"},
		{`{"type":"json_pointer"}`, ""}, // pointer "" is the whole document: valid
		{`{"type":"json_pointer","pointer":"a"}`, `must be empty or start with "/"`},
		{`{"type":"json_pointer","pointer":"/a~2"}`, `"~" must be followed by 0 or 1`},
		{`{"type":"json_pointer","pointer":"/a~"}`, `"~" must be followed by 0 or 1`},
		{`{"type":"json_pointer","pointer":5}`, "pointer must be a string"},
		{`{"type":"json_pointer","pointer":"/` + strings.Repeat("x", MaxPointerBytes) + `"}`, "pointer longer than"},
		{`{"type":"json_keys"}`, "keys must not be empty"},
		{`{"type":"json_keys","keys":[]}`, "keys must not be empty"},
		{`{"type":"json_keys","keys":null}`, "keys must be an array of strings"},
		{`{"type":"json_keys","keys":[1]}`, "keys must be an array of strings"},
		{`{"type":"json_keys","keys":"a"}`, "keys must be an array of strings"},
		{`{"type":"json_keys","keys":["a","a"]}`, `duplicate key "a"`},
		{`{"type":"json_keys","keys":["a"],"pointer":"x"}`, `must be empty or start with "/"`},
		{`{"type":"grep"}`, "pattern must not be empty"},
		{`{"type":"grep","pattern":""}`, "pattern must not be empty"},
		{`{"type":"grep","pattern":"(unclosed"}`, "pattern does not compile: missing closing )"},
		{`{"type":"grep","pattern":"a**"}`, "pattern does not compile"},
		{`{"type":"grep","pattern":"(?<=x)y"}`, "pattern does not compile"},
		{`{"type":"grep","pattern":"` + long + `"}`, "pattern longer than 512 bytes"},
		{`{"type":"grep","pattern":"x","max_matches":0}`, "max_matches must be at least 1"},
		{`{"type":"grep","pattern":"x","max_matches":201}`, "max_matches must be between 1 and 200"},
		{`{"type":"grep","pattern":"x","start":-1}`, "grep: start must be between 1 and"},
		{`{"type":"grep","pattern":"x","end":9}`, `unknown field "end"`},
	}
	for _, tc := range tests {
		t.Run(tc.in[:min(len(tc.in), 60)], func(t *testing.T) {
			_, err := ParseSelector(json.RawMessage(tc.in))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBadSelector) {
				t.Fatalf("err = %v, want ErrBadSelector", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to contain %q", err, tc.want)
			}
			if strings.ContainsAny(err.Error(), "\n\r") || len(err.Error()) > 300 {
				t.Fatalf("error is not one short line: %q", err)
			}
		})
	}
	// Oversized input is refused before parsing.
	if _, err := ParseSelector(json.RawMessage(`{"type":"head","x":"` + strings.Repeat("a", MaxSelectorBytes) + `"}`)); !errors.Is(err, ErrBadSelector) {
		t.Errorf("oversized selector: %v", err)
	}
	// UnmarshalJSON is ParseSelector.
	var s Selector
	if err := json.Unmarshal([]byte(`{"type":"rows","start":2}`), &s); err != nil || s.Start != 2 {
		t.Errorf("UnmarshalJSON: %+v %v", s, err)
	}
	if err := json.Unmarshal([]byte(`{"type":"rows","start":2,"x":1}`), &s); !errors.Is(err, ErrBadSelector) {
		t.Errorf("UnmarshalJSON strict: %v", err)
	}
}

func TestPointer(t *testing.T) {
	tests := []struct {
		in   string
		toks []string
	}{
		{"", nil},
		{"/", []string{""}},
		{"//", []string{"", ""}},
		{"/a/b", []string{"a", "b"}},
		{"/a~1b", []string{"a/b"}},
		{"/m~0n", []string{"m~n"}},
		{"/~01", []string{"~1"}}, // not "/": ~0 first would be wrong
		{"/~10", []string{"/0"}},
		{"/ ", []string{" "}},
		{"/0/-", []string{"0", "-"}},
	}
	for _, tc := range tests {
		toks, err := parsePointer(tc.in)
		if err != nil || !reflect.DeepEqual(toks, tc.toks) {
			t.Errorf("parsePointer(%q) = %q, %v; want %q", tc.in, toks, err, tc.toks)
		}
		if back := jsonpointer.Format(toks); back != tc.in {
			t.Errorf("jsonpointer.Format(%q) = %q, want %q", toks, back, tc.in)
		}
	}
	for _, tok := range []string{"0", "10", "123456"} {
		if _, ok := jsonpointer.ArrayIndex(tok); !ok {
			t.Errorf("jsonpointer.ArrayIndex(%q) rejected", tok)
		}
	}
	for _, tok := range []string{"", "-", "01", "-1", "1e3", " 1", "0x1", "9999999999999999"} {
		if _, ok := jsonpointer.ArrayIndex(tok); ok {
			t.Errorf("jsonpointer.ArrayIndex(%q) accepted", tok)
		}
	}
}
