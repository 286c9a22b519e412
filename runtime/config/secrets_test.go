package config

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// env is a fake environment for ResolveHeaders and ResolveEnv.
func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := kv[k]
		return v, ok
	}
}

func TestResolveHeaders(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "tok")
	if err := os.WriteFile(tokFile, []byte("  file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-value"
	cases := []struct {
		name    string
		cr      Credentials
		env     map[string]string
		want    http.Header
		wantErr string // substring; "" means success
	}{
		{name: "none", want: http.Header{}},
		{name: "bearer env", cr: Credentials{BearerEnv: "DOCS_TOKEN"}, env: map[string]string{"DOCS_TOKEN": secret},
			want: http.Header{"Authorization": {"Bearer " + secret}}},
		{name: "bearer env trimmed", cr: Credentials{BearerEnv: "T"}, env: map[string]string{"T": " tok\n"},
			want: http.Header{"Authorization": {"Bearer tok"}}},
		{name: "bearer file", cr: Credentials{BearerFile: tokFile},
			want: http.Header{"Authorization": {"Bearer file-token"}}},
		{name: "headers", cr: Credentials{HeadersEnv: map[string]string{"x-api-key": "K", "X-Org": "O"}},
			env:  map[string]string{"K": secret, "O": "acme"},
			want: http.Header{"X-Api-Key": {secret}, "X-Org": {"acme"}}},
		{name: "bearer unset", cr: Credentials{BearerEnv: "DOCS_TOKEN"}, env: map[string]string{},
			wantErr: `upstream "docs": credentials.bearer_env: environment variable DOCS_TOKEN is not set`},
		{name: "bearer empty", cr: Credentials{BearerEnv: "DOCS_TOKEN"}, env: map[string]string{"DOCS_TOKEN": " "},
			wantErr: "environment variable DOCS_TOKEN is empty"},
		{name: "header unset", cr: Credentials{HeadersEnv: map[string]string{"X-Key": "KEY_VAR"}}, env: map[string]string{},
			wantErr: "credentials.headers_env.X-Key: environment variable KEY_VAR is not set"},
		{name: "header injection", cr: Credentials{HeadersEnv: map[string]string{"X-Key": "K"}}, env: map[string]string{"K": secret + "\r\nX-Evil: 1"},
			wantErr: "environment variable K holds a line break or NUL"},
		{name: "file missing", cr: Credentials{BearerFile: filepath.Join(dir, "nope")}, wantErr: "credentials.bearer_file"},
		{name: "file empty", cr: Credentials{BearerFile: emptyFile}, wantErr: "is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := &Upstream{Name: "docs", URL: "http://h/mcp", Credentials: tc.cr}
			h, err := u.ResolveHeaders(env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want %q", err, tc.wantErr)
				}
				if !errors.Is(err, ErrCredential) {
					t.Errorf("%v does not match ErrCredential", err)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error leaks the value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(h, tc.want) {
				t.Fatalf("got %v, want %v", h, tc.want)
			}
		})
	}
}

func TestResolveEnv(t *testing.T) {
	u := &Upstream{Name: "files", Command: []string{"srv"}, Env: map[string]string{
		"B_LITERAL": "x",
		"A_KEY":     "${SRC}",
		"C_EMPTY":   "",
	}}
	got, err := u.ResolveEnv(env(map[string]string{"SRC": "from-env"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A_KEY=from-env", "B_LITERAL=x", "C_EMPTY="}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	_, err = u.ResolveEnv(env(nil))
	if !errors.Is(err, ErrCredential) || !strings.Contains(err.Error(), "env.A_KEY: environment variable SRC is not set") {
		t.Fatalf("got %v", err)
	}
	if got, err := (&Upstream{}).ResolveEnv(env(nil)); got != nil || err != nil {
		t.Fatalf("no env: %v %v", got, err)
	}
}

func TestSecretNames(t *testing.T) {
	for k, want := range map[string]bool{
		"token": true, "bearer": true, "password": true, "api_key": true, "apiKey": true, "client-secret": true,
		"github_token": true, "Authorization": true, "key": true, "cookie": true,
		"name": false, "url": false, "top_k": false, "tokens": true, "keyword": false,
	} {
		if got := looksSecretKey(k); got != want {
			t.Errorf("looksSecretKey(%q) = %v", k, got)
		}
	}
	for k, want := range map[string]bool{
		"GITHUB_TOKEN": true, "DB_PASSWORD": true, "OPENAI_API_KEY": true, "AWS_SECRET_ACCESS_KEY": true,
		"GITHUB_PAT": true, "CLIENT_SECRET": true,
		"MAX_TOKENS": false, "TOKENIZERS_PARALLELISM": false, "NODE_OPTIONS": false, "KEY_PREFIX": false, "PWD": false,
	} {
		if got := looksSecretEnvName(k); got != want {
			t.Errorf("looksSecretEnvName(%q) = %v", k, got)
		}
	}
}
