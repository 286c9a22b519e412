package credscan

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
)

// Test shapes are assembled at run time so that no scanner in CI flags
// this file.
var (
	ghp     = "gh" + "p_" + strings.Repeat("a1B2", 9)
	akia    = "AK" + "IA" + "IOSFODNN7EXAMPLE"
	secret  = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	jwt     = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiJhbGljZSJ9." + "c2lnbmF0dXJlLXNpZ25hdHVyZQ"
	pemHead = "-----BEGIN " + "RSA PRIVATE KEY-----"
	slack   = "xo" + "xb-123456789012-abcdefghijkl"
	google  = "AI" + "za" + strings.Repeat("Sy0_", 8) + "abc"
)

func TestScan(t *testing.T) {
	caller := "opaque.caller-token_" + strings.Repeat("z", 20)
	for _, tc := range []struct {
		name, raw string
		kind, key string // "" when nothing is found
	}{
		// keyed
		{"access token", `{"access_token":"abcdefghijklmnop1234"}`, KindKeyed, "access_token"},
		{"authorization header value", `{"Authorization":"Bearer abcdefghijklmnop1234"}`, KindKeyed, "Authorization"},
		{"aws secret key", `{"aws_secret_access_key":"` + secret + `"}`, KindKeyed, "aws_secret_access_key"},
		{"aws secret key dashed", `{"AWS-Secret-Access-Key":"` + secret + `"}`, KindKeyed, "AWS-Secret-Access-Key"},
		{"cookie", `{"cookie":"session=0123456789abcdef; theme=dark"}`, KindCookie, "cookie"},
		{"set-cookie", `{"Set-Cookie":"sid=s%3Aabcdef1234567; Path=/; HttpOnly"}`, KindCookie, "Set-Cookie"},
		{"nested keyed", `{"req":{"headers":[{"x-api-key":"0123456789abcdef0123"}]}}`, KindKeyed, "x-api-key"},
		// shapes anywhere
		{"pem private key", `{"text":"` + pemHead + `\nMIIE...\n"}`, KindPrivateKey, "text"},
		{"openssh private key", `{"text":"-----BEGIN OPENSSH PRIVATE KEY-----"}`, KindPrivateKey, "text"},
		{"encrypted private key", `{"c":"-----BEGIN ENCRYPTED PRIVATE KEY-----"}`, KindPrivateKey, "c"},
		{"aws key id", `{"text":"use ` + akia + ` please"}`, KindAWS, "text"},
		{"aws secret in text", `{"text":"aws_secret_access_key = ` + secret + `"}`, KindAWS, "text"},
		{"github token", `{"body":"token ` + ghp + `"}`, KindProviderToken, "body"},
		{"slack token", `{"msg":"` + slack + `"}`, KindProviderToken, "msg"},
		{"google api key", `{"q":"key=` + google + `"}`, KindProviderToken, "q"},
		{"jwt", `{"text":"here: ` + jwt + `"}`, KindJWT, "text"},
		{"authorization header in text", `{"text":"curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='"}`, KindHeader, "text"},
		{"cookie header in text", `{"text":"Cookie: sid=0123456789abcdef"}`, KindHeader, "text"},
		{"bearer in text", `{"text":"send bearer abcdefghijklmnopqrstuvwx"}`, KindHeader, "text"},
		{"caller token in text", `{"text":"x ` + caller + ` y"}`, KindCallerToken, "text"},
		{"caller token as value", `{"note":"  ` + caller + `  "}`, KindCallerToken, "note"},
		{"caller token after equals", `{"u":"https://x.example/?t=` + caller + `"}`, KindCallerToken, "u"},
		{"in an array", `{"list":["a","` + pemHead + `"]}`, KindPrivateKey, "list"},
		// near misses
		{"short token", `{"token":"short"}`, "", ""},
		{"token word", `{"token":"not a token value"}`, "", ""},
		{"cookie without session", `{"cookie":"none"}`, "", ""},
		{"cookie short value", `{"cookie":"a=b"}`, "", ""},
		{"cookie policy key", `{"cookie_policy":"session=0123456789abcdef"}`, "", ""},
		{"public key", `{"text":"-----BEGIN PUBLIC KEY-----"}`, "", ""},
		{"certificate", `{"text":"-----BEGIN CERTIFICATE-----"}`, "", ""},
		{"akia too short", `{"text":"AKIA1234"}`, "", ""},
		{"akia lower case", `{"text":"akiaiosfodnn7example"}`, "", ""},
		{"ghp short", `{"text":"ghp_abc"}`, "", ""},
		{"xoxb alone", `{"text":"xoxb"}`, "", ""},
		{"AIza short", `{"text":"AIzaSy"}`, "", ""},
		{"not a jwt", `{"text":"eyJ.eyJ.x"}`, "", ""},
		{"authorization prose", `{"text":"authorization: required for admins"}`, "", ""},
		{"bearer prose", `{"text":"the bearer of bad news"}`, "", ""},
		{"aws secret key prose", `{"text":"set aws_secret_access_key in your profile"}`, "", ""},
		{"password key", `{"password":"correct horse battery staple"}`, "", ""},
		{"hash", `{"sha":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}`, "", ""},
		{"other caller-like", `{"text":"opaque.caller-token_zzzz"}`, "", ""},
		{"number", `{"token":12345678901234567890}`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args map[string]any
			if err := json.Unmarshal([]byte(tc.raw), &args); err != nil {
				t.Fatal(err)
			}
			f := WithCaller(sha256.Sum256([]byte(caller))).Scan(args)
			switch {
			case tc.kind == "" && f != nil:
				t.Fatalf("found %+v", f)
			case tc.kind != "" && f == nil:
				t.Fatal("found nothing")
			case f != nil && (f.Kind != tc.kind || f.Key != tc.key):
				t.Fatalf("found %+v, want %s under %q", f, tc.kind, tc.key)
			}
		})
	}
	// Without a caller, the caller's opaque token is just text.
	if f := (&Scanner{}).Scan(map[string]any{"text": caller}); f != nil {
		t.Fatalf("no caller: %+v", f)
	}
}

// FuzzScan checks that any JSON value scans without panic, deterministically,
// and that a finding is of a known kind.
func FuzzScan(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"cookie":"a=0123456789"}`, `{"t":"` + jwt + `"}`, `["` + pemHead + `"]`,
		`{"x":{"y":[{"authorization":"Bearer 0123456789abcdef"}]}}`, `"Authorization: Bearer 0123456789"`} {
		f.Add(s)
	}
	sc := WithCaller(sha256.Sum256([]byte("caller-token-0123456789")))
	f.Fuzz(func(t *testing.T, raw string) {
		var v any
		if json.Unmarshal([]byte(raw), &v) != nil {
			return
		}
		a, b := sc.Scan(v), sc.Scan(v)
		if (a == nil) != (b == nil) {
			t.Fatal("not deterministic")
		}
		if a != nil && !strings.Contains(" KEYED COOKIE PEM_PRIVATE_KEY AWS_KEY PROVIDER_TOKEN JWT AUTH_HEADER CALLER_TOKEN ", " "+a.Kind+" ") {
			t.Fatalf("kind %q", a.Kind)
		}
	})
}
