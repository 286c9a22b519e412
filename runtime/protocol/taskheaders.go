package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// taskMethods are the methods of the extension that name a task.
var taskMethods = map[string]bool{"tasks/get": true, "tasks/update": true, "tasks/cancel": true}

// TaskHeaders is HTTP middleware for sessionless requests: the tasks
// extension requires tasks/get, tasks/update and tasks/cancel to carry
// Mcp-Name with their params.taskId (so that intermediaries can route a
// task's requests to the instance that holds it), and the go-sdk checks
// Mcp-Name only for tools/call, resources/read and prompts/get. A missing
// or different Mcp-Name is refused as the go-sdk refuses those: HTTP 400,
// -32020. limit bounds the body read (0: the go-sdk's default); a larger
// body is left to the handler, which refuses it.
func TaskHeaders(limit int64, next http.Handler) http.Handler {
	if limit <= 0 {
		limit = mcp.DefaultMaxRequestBodyBytes
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		method := req.Header.Get("Mcp-Method")
		if req.Method != http.MethodPost || !taskMethods[method] || req.Body == nil {
			next.ServeHTTP(w, req)
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), req.Body), req.Body}
		if err != nil || int64(len(body)) > limit {
			next.ServeHTTP(w, req)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				TaskID *string `json:"taskId"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Method != method || msg.Params.TaskID == nil {
			// Not a request the header rule covers (a batch, another
			// method, no taskId): the handler judges it.
			next.ServeHTTP(w, req)
			return
		}
		name := req.Header.Get("Mcp-Name")
		if name == *msg.Params.TaskID {
			next.ServeHTTP(w, req)
			return
		}
		text := fmt.Sprintf("missing required Mcp-Name header for method %q", method)
		if name != "" {
			text = fmt.Sprintf("header mismatch: Mcp-Name header value does not match params.taskId of %q", method)
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID,
			"error": &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: text}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(b)
	})
}
