package protocol

// This file holds the task ids quiver hands a client for the tasks
// extension (io.modelcontextprotocol/tasks, SEP-2663): an upstream's task
// is relayed under an id of quiver's that names the upstream, the upstream's
// own id, the tool and the principal it was issued to, sealed like a
// request state (HMAC-SHA256, a key shared by every replica). Nothing is
// stored: any replica opens the id, and the task itself lives on the
// upstream. Unlike a request state, a task id is used many times (every
// tasks/get), so it carries no nonce.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TasksExtension is the identifier of the tasks extension, the key of its
// entry in client and server capabilities' extensions.
const TasksExtension = "io.modelcontextprotocol/tasks"

// Errors of OpenTask.
var (
	// ErrTaskUnknown: the id is malformed, too large, or its seal does
	// not verify (forged, altered, or sealed with another key).
	ErrTaskUnknown = errors.New("task not found")
	// ErrTaskExpired: the id is past its expiry.
	ErrTaskExpired = errors.New("task has expired")
	// ErrTaskForeign: the id was issued to another principal.
	ErrTaskForeign = errors.New("task belongs to another caller")
)

// MaxTaskID is the longest task id OpenTask reads; a longer one is refused
// before any work is done on it.
const MaxTaskID = 2 << 10

// MaxUpstreamTaskID is the longest upstream task id quiver relays (the
// sealed id grows with it).
const MaxUpstreamTaskID = 512

// MaxTaskTTL bounds how long quiver's id of a task stays valid, whatever
// the upstream's ttlMs says (null is unlimited there).
const MaxTaskTTL = 24 * time.Hour

// taskPrefix marks quiver's task ids (and their format's version).
const taskPrefix = "qt1."

// TaskRef is what quiver's task id stands for.
type TaskRef struct {
	// Upstream names the upstream that holds the task.
	Upstream string `json:"up"`
	// TaskID is the upstream's own task id.
	TaskID string `json:"id"`
	// ToolID is the tool_id whose call created the task: its result
	// goes through that tool's result path.
	ToolID string `json:"t"`
	// Direct is set when the call was a directly listed tool's (its
	// result is shaped as a direct result, not an envelope).
	Direct bool `json:"d,omitempty"`
	// Principal is the key of the principal the id was issued to.
	Principal string `json:"p"`
	// Expires is when the id stops opening (unix milliseconds).
	Expires int64 `json:"exp"`
}

// SealTask returns ref sealed as a task id, valid for ttl (at most
// MaxTaskTTL; 0 or less is MaxTaskTTL).
func (s *Sealer) SealTask(ref TaskRef, ttl time.Duration) (string, error) {
	if len(ref.TaskID) == 0 || len(ref.TaskID) > MaxUpstreamTaskID {
		return "", fmt.Errorf("protocol: an upstream task id of %d bytes (1 to %d)", len(ref.TaskID), MaxUpstreamTaskID)
	}
	if ttl <= 0 || ttl > MaxTaskTTL {
		ttl = MaxTaskTTL
	}
	ref.Expires = s.now().Add(ttl).UnixMilli()
	body, err := json.Marshal(ref)
	if err != nil {
		return "", fmt.Errorf("protocol: %w", err)
	}
	text := b64.EncodeToString(body)
	id := taskPrefix + text + "." + b64.EncodeToString(s.taskMAC(text))
	if len(id) > MaxTaskID {
		return "", fmt.Errorf("protocol: task id of %d bytes exceeds %d", len(id), MaxTaskID)
	}
	return id, nil
}

// taskMAC is the seal of a task id: keyed apart from request states, so
// that neither can be passed off as the other.
func (s *Sealer) taskMAC(text string) []byte {
	k := hmac.New(sha256.New, s.key)
	k.Write([]byte("quiver task id v1"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(text))
	return m.Sum(nil)
}

// OpenTask verifies a task id for principal. The checks run in order:
// size, format, seal, expiry, principal.
func (s *Sealer) OpenTask(id, principal string) (TaskRef, error) {
	if len(id) > MaxTaskID {
		return TaskRef{}, ErrTaskUnknown
	}
	rest, ok := strings.CutPrefix(id, taskPrefix)
	if !ok {
		return TaskRef{}, ErrTaskUnknown
	}
	text, tag, ok := strings.Cut(rest, ".")
	if !ok {
		return TaskRef{}, ErrTaskUnknown
	}
	got, err := b64.DecodeString(tag)
	if err != nil || !hmac.Equal(got, s.taskMAC(text)) {
		return TaskRef{}, ErrTaskUnknown
	}
	body, err := b64.DecodeString(text)
	if err != nil {
		return TaskRef{}, ErrTaskUnknown
	}
	var ref TaskRef
	if err := json.Unmarshal(body, &ref); err != nil || ref.TaskID == "" || ref.Upstream == "" {
		return TaskRef{}, ErrTaskUnknown
	}
	if !s.now().Before(time.UnixMilli(ref.Expires)) {
		return TaskRef{}, ErrTaskExpired
	}
	if ref.Principal != principal {
		return TaskRef{}, ErrTaskForeign
	}
	return ref, nil
}
