package firewall

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// commas formats n with thousands separators: 48213 -> "48,213".
func commas[T ~int | ~int64](n T) string {
	s := strconv.FormatInt(int64(n), 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	if len(s) > 3 {
		var b strings.Builder
		lead := len(s) % 3
		if lead > 0 {
			b.WriteString(s[:lead])
		}
		for i := lead; i < len(s); i += 3 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(s[i : i+3])
		}
		s = b.String()
	}
	if neg {
		return "-" + s
	}
	return s
}

// plural returns "1 line" or "2 lines".
func plural[T ~int | ~int64](n T, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return commas(n) + " " + many
}

// clip shortens s to at most max runes, marking the cut with "…", and
// replaces control characters (other than tab) so a summary line stays one
// line.
func clip(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	cut := false
	if utf8.RuneCountInString(s) > max {
		i, n := 0, 0
		for i < len(s) && n < max {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			n++
		}
		s, cut = s[:i], true
	}
	if strings.IndexFunc(s, isCtl) >= 0 {
		s = strings.Map(func(r rune) rune {
			if isCtl(r) {
				return ' '
			}
			return r
		}, s)
	}
	if cut {
		s += "…"
	}
	return s
}

func isCtl(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }

// joinCapped joins items with ", " until the result would pass max bytes, then
// notes how many were left out.
func joinCapped(items []string, total, max int) string {
	var b strings.Builder
	shown := 0
	for _, it := range items {
		if b.Len() > 0 && b.Len()+len(it)+2 > max {
			break
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(it)
		shown++
	}
	if total > shown {
		b.WriteString(", … " + commas(total-shown) + " more")
	}
	return b.String()
}
