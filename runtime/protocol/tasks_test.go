package protocol

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func taskSealer(t *testing.T, now *time.Time) *Sealer {
	t.Helper()
	s, err := NewSealer(make([]byte, KeySize), SealerOptions{Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTaskID(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := taskSealer(t, &now)
	ref := TaskRef{Upstream: "up", TaskID: "786512e2", ToolID: "up:slow#12345678", Principal: "jwt:alice"}
	id, err := s.SealTask(ref, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.OpenTask(id, "jwt:alice")
	if err != nil || got.TaskID != ref.TaskID || got.Upstream != ref.Upstream || got.ToolID != ref.ToolID {
		t.Fatalf("OpenTask = %+v, %v", got, err)
	}
	other, _ := NewSealer([]byte(strings.Repeat("k", KeySize)), SealerOptions{Now: func() time.Time { return now }})
	state, _ := s.Seal(State{Upstream: "up", Principal: "jwt:alice"})
	tampered := []byte(id)
	tampered[len(taskPrefix)+3] ^= 1
	for _, tc := range []struct {
		name, id, principal string
		s                   *Sealer
		want                error
	}{
		{"foreign", id, "jwt:bob", s, ErrTaskForeign},
		{"tampered", string(tampered), "jwt:alice", s, ErrTaskUnknown},
		{"other key", id, "jwt:alice", other, ErrTaskUnknown},
		{"request state", taskPrefix + state, "jwt:alice", s, ErrTaskUnknown},
		{"raw upstream id", "786512e2", "jwt:alice", s, ErrTaskUnknown},
		{"oversized", taskPrefix + strings.Repeat("a", MaxTaskID), "jwt:alice", s, ErrTaskUnknown},
		{"empty", "", "jwt:alice", s, ErrTaskUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.s.OpenTask(tc.id, tc.principal); !errors.Is(err, tc.want) {
				t.Fatalf("OpenTask = %v, want %v", err, tc.want)
			}
		})
	}
	now = now.Add(time.Minute)
	if _, err := s.OpenTask(id, "jwt:alice"); !errors.Is(err, ErrTaskExpired) {
		t.Fatalf("expired: %v", err)
	}
}

func TestSealTaskBounds(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := taskSealer(t, &now)
	if _, err := s.SealTask(TaskRef{Upstream: "up", TaskID: strings.Repeat("x", MaxUpstreamTaskID+1)}, 0); err == nil {
		t.Fatal("an oversized upstream task id was sealed")
	}
	if _, err := s.SealTask(TaskRef{Upstream: "up"}, 0); err == nil {
		t.Fatal("an empty upstream task id was sealed")
	}
	id, err := s.SealTask(TaskRef{Upstream: "up", TaskID: "t", Principal: "p"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := s.OpenTask(id, "p")
	if got := time.UnixMilli(ref.Expires).Sub(now); got != MaxTaskTTL {
		t.Fatalf("unlimited ttl capped at %s, want %s", got, MaxTaskTTL)
	}
}

func FuzzOpenTask(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	s, err := NewSealer(make([]byte, KeySize), SealerOptions{Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	id, err := s.SealTask(TaskRef{Upstream: "up", TaskID: "t-1", ToolID: "up:x#00000000", Principal: "p"}, time.Minute)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(id, "p")
	f.Add("qt1..", "p")
	f.Add("qt1.e30.AAAA", "")
	f.Fuzz(func(t *testing.T, id, principal string) {
		ref, err := s.OpenTask(id, principal)
		if err == nil && (ref.TaskID == "" || ref.Principal != principal) {
			t.Fatalf("opened %q to %+v", id, ref)
		}
	})
}
