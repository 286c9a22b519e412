// Package textclean makes outside text safe to quote in a one-line message.
package textclean

import "strings"

// OneLine collapses s to one line: control characters (C0, DEL, C1) become
// spaces, runs of spaces become one, the result is trimmed and capped at
// about max bytes (it stops at the first rune that reaches max).
func OneLine(s string, max int) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			r = ' '
		}
		if r == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteRune(r)
		if b.Len() >= max {
			break
		}
	}
	return strings.TrimSpace(b.String())
}
