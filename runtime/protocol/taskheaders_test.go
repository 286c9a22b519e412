package protocol

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTaskHeaders(t *testing.T) {
	reached := ""
	h := TaskHeaders(1<<10, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		reached = string(b)
	}))
	get := `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"qt1.x"}}`
	for _, tc := range []struct {
		name, method, mcpName, body string
		refused                     bool
	}{
		{"matching", "tasks/get", "qt1.x", get, false},
		{"missing", "tasks/get", "", get, true},
		{"different", "tasks/get", "qt1.y", get, true},
		{"tools/call", "tools/call", "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, false},
		{"method mismatch left to the go-sdk", "tasks/cancel", "", get, false},
		{"no taskId", "tasks/get", "", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{}}`, false},
		{"oversized", "tasks/get", "", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"` + strings.Repeat("a", 2<<10) + `"}}`, false},
		{"not JSON", "tasks/get", "", `{`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reached = ""
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tc.body))
			req.Header.Set("Mcp-Method", tc.method)
			if tc.mcpName != "" {
				req.Header.Set("Mcp-Name", tc.mcpName)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if tc.refused {
				if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `"code":-32020`) || !strings.Contains(w.Body.String(), `"id":7`) || reached != "" {
					t.Fatalf("got %d %s (reached %q), want a 400 -32020 refusal", w.Code, w.Body, reached)
				}
				return
			}
			if reached != tc.body {
				t.Fatalf("the handler read %q, want the whole body", reached)
			}
		})
	}
}

func FuzzTaskHeaders(f *testing.F) {
	f.Add("tasks/get", "qt1.x", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"qt1.x"}}`)
	f.Add("tasks/update", "", `{"jsonrpc":"2.0","id":"a","method":"tasks/update","params":{"taskId":""}}`)
	f.Add("tasks/cancel", "x", `[{"method":"tasks/cancel"}]`)
	h := TaskHeaders(1<<12, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
	}))
	f.Fuzz(func(t *testing.T, method, name, body string) {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header["Mcp-Method"] = []string{method}
		req.Header["Mcp-Name"] = []string{name}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("status %d", w.Code)
		}
	})
}
