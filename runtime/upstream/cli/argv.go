package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxArgvBytes bounds the argv a template builds (the kernel's limit is
// larger; a tool call needs far less).
const MaxArgvBytes = 128 << 10

// ErrArgRefused is matched (errors.Is) by every refusal of Build.
var ErrArgRefused = errors.New("argument refused")

// ArgError is a value the template refuses to place.
type ArgError struct {
	// Arg is the input field.
	Arg string
	// Reason is one line, without the value.
	Reason string
}

// Error implements error.
func (e *ArgError) Error() string { return fmt.Sprintf("argument %q: %s", e.Arg, e.Reason) }

// Is makes errors.Is(err, ErrArgRefused) true.
func (e *ArgError) Is(target error) bool { return target == ErrArgRefused }

// Build returns the argv after the command for args, the validated input
// (a decoded JSON object). See the package documentation for the rules;
// the values are never split or interpreted.
func Build(items []ArgItem, args map[string]any) ([]string, error) {
	var out []string
	endOfOptions := false
	size := 0
	add := func(s string) error {
		size += len(s) + 1
		if size > MaxArgvBytes {
			return &ArgError{Arg: "*", Reason: fmt.Sprintf("the command line would exceed %d bytes", MaxArgvBytes)}
		}
		out = append(out, s)
		return nil
	}
	for _, it := range items {
		switch {
		case it.Arg != "":
			v, ok := args[it.Arg]
			if !ok || v == nil {
				continue
			}
			vals, err := scalars(it.Arg, v)
			if err != nil {
				return nil, err
			}
			for _, s := range vals {
				if strings.ContainsRune(s, 0) {
					return nil, &ArgError{Arg: it.Arg, Reason: "holds a NUL byte"}
				}
				if it.Prefix != "" {
					s = it.Prefix + s
				} else if !endOfOptions && strings.HasPrefix(s, "-") {
					return nil, &ArgError{Arg: it.Arg, Reason: "begins with '-' and would be read as an option; the manifest does not place it after \"--\""}
				}
				if err := add(s); err != nil {
					return nil, err
				}
			}
		case it.Flag != "":
			if b, _ := args[it.If].(bool); b {
				if err := add(it.Flag); err != nil {
					return nil, err
				}
			}
		default:
			if it.Literal == "--" {
				endOfOptions = true
			}
			if err := add(it.Literal); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// scalars renders a value as its arguments: a string as itself, a number
// in its shortest form, a boolean as true or false, an array one argument
// per element. Objects and nested arrays are refused.
func scalars(name string, v any) ([]string, error) {
	if l, ok := v.([]any); ok {
		out := make([]string, 0, len(l))
		for _, e := range l {
			s, err := scalar(name, e)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := scalar(name, v)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

func scalar(name string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case json.Number:
		return x.String(), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", &ArgError{Arg: name, Reason: "is not a finite number"}
		}
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10), nil
		}
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	}
	return "", &ArgError{Arg: name, Reason: "is an object or a nested array, which has no argv form"}
}
