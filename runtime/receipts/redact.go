package receipts

import "regexp"

// Redacted replaces a secret in a redacted string.
const Redacted = "[REDACTED]"

// redaction is one secret shape: re's match is replaced by repl (which
// may refer to re's groups to keep a harmless prefix).
type redaction struct {
	re   *regexp.Regexp
	repl string
}

// redactions are compiled once; regexp values are safe for concurrent use
// and never modified.
var redactions = []redaction{
	// Authorization headers and bearer tokens.
	{regexp.MustCompile(`(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}`), "${1}${2}" + Redacted},
	// JWTs anywhere (header.payload.signature, base64url).
	{regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`), Redacted},
	// OpenAI / Anthropic style keys: sk-..., sk-proj-..., sk-ant-...
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`), Redacted},
	// GitHub tokens: ghp_, gho_, ghu_, ghs_, ghr_, github_pat_.
	{regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`), Redacted},
	// Slack tokens.
	{regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`), Redacted},
	// AWS access key ids.
	{regexp.MustCompile(`\b(AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`), Redacted},
	// Google API keys.
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`), Redacted},
	// PEM private keys.
	{regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)`), Redacted},
	// Credentials in URLs: scheme://user:password@host.
	{regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+):[^\s@/]+@`), "${1}:" + Redacted + "@"},
	// key=value and key: value pairs whose key names a secret (AWS secret
	// access keys included), quoted or not.
	{regexp.MustCompile(`(?i)\b([a-z0-9_.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|client[_-]?secret|authorization|credentials?)["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s&,;"']+)`), "${1}" + Redacted},
}

// Redact returns s with secrets replaced by [REDACTED]: bearer and basic
// credentials, JWTs, sk-… API keys, GitHub (ghp_…, github_pat_…) and Slack
// tokens, AWS access key ids, Google API keys, PEM private keys, passwords
// in URLs, and the values of password=, secret=, token=, api_key=,
// aws_secret_access_key= and similar pairs. It is meant for messages
// (error text, log lines), not for structured data.
func Redact(s string) string {
	for _, r := range redactions {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	return s
}
