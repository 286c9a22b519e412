package config

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"time"

	"github.com/quiver-mcp/quiver/runtime/egress"
	"github.com/quiver-mcp/quiver/runtime/sandbox"
	"github.com/quiver-mcp/quiver/runtime/units"
)

// Sandbox isolates a command upstream with bubblewrap (runtime/sandbox):
// filesystem binds, network (none, or an allowlist through quiver's
// egress proxy), the names of quiver's environment variables passed in,
// and resource limits. Off, with a reason, turns it off explicitly, which
// environment prod requires of a command upstream without a sandbox.
type Sandbox struct {
	// Off, when not empty, is why this upstream runs without a sandbox;
	// it excludes every other key.
	Off string `json:"off,omitempty" yaml:"off,omitempty"`
	// FS are the paths bound into the sandbox.
	FS SandboxFS `json:"fs,omitzero" yaml:"fs,omitempty"`
	// Net is the network: none (the default) or an allowlist.
	Net SandboxNet `json:"net" yaml:"net"`
	// Env names variables of quiver's environment passed to the server
	// (values taken at start; unset ones are skipped).
	Env []string `json:"env,omitempty" yaml:"env,omitempty,flow"`
	// Limits are the resource limits of the server's process tree.
	Limits SandboxLimits `json:"limits" yaml:"limits"`
}

// SandboxFS are absolute paths (relative ones in the file are relative to
// its directory) bound into the sandbox.
type SandboxFS struct {
	// Read are bound read-only, on top of the system paths.
	Read []string `json:"read,omitempty" yaml:"read,omitempty,flow"`
	// Write are bound read-write, with the upstream's workspace roots: the
	// only writable paths besides a private /tmp and HOME.
	Write []string `json:"write,omitempty" yaml:"write,omitempty,flow"`
}

// IsZero reports whether no path is given.
func (f SandboxFS) IsZero() bool { return len(f.Read) == 0 && len(f.Write) == 0 }

// SandboxNet is a sandbox's network: no Allow means none at all (written
// `net: none`); otherwise the hosts reached through the egress proxy
// (written `net: {allow: [...]}`).
type SandboxNet struct {
	Allow []string
}

// netNone is the written form of a network-less sandbox.
const netNone = "none"

// MarshalJSON writes "none" or {"allow": [...]}.
func (n SandboxNet) MarshalJSON() ([]byte, error) {
	if len(n.Allow) == 0 {
		return json.Marshal(netNone)
	}
	return json.Marshal(map[string][]string{"allow": n.Allow})
}

// UnmarshalJSON reads "none" or {"allow": [...]}.
func (n *SandboxNet) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if s != netNone {
			return errors.New(`must be "none" or {allow: [hosts]}`)
		}
		n.Allow = nil
		return nil
	}
	var v struct {
		Allow []string `json:"allow"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return errors.New(`must be "none" or {allow: [hosts]}`)
	}
	n.Allow = v.Allow
	return nil
}

// MarshalYAML writes "none" or {allow: [...]}.
func (n SandboxNet) MarshalYAML() (any, error) {
	if len(n.Allow) == 0 {
		return netNone, nil
	}
	return map[string][]string{"allow": n.Allow}, nil
}

// SandboxLimits are the rlimits of a sandboxed server.
type SandboxLimits struct {
	// Memory bounds each process's data segment (RLIMIT_DATA).
	Memory units.Size `json:"memory" yaml:"memory"`
	// Processes bounds processes and threads (RLIMIT_NPROC).
	Processes int `json:"processes" yaml:"processes"`
	// OpenFiles bounds open file descriptors (RLIMIT_NOFILE).
	OpenFiles int `json:"open_files" yaml:"open_files"`
	// CPUTime bounds each process's CPU time (RLIMIT_CPU); a server
	// that reaches it is killed and restarted by the supervisor.
	CPUTime units.Duration `json:"cpu_time" yaml:"cpu_time"`
}

// defaults sets the default limits of a sandbox block.
func (s *Sandbox) defaults() {
	*s = Sandbox{Limits: SandboxLimits{
		Memory:    units.Size(sandbox.DefaultMemory),
		Processes: sandbox.DefaultProcesses,
		OpenFiles: sandbox.DefaultOpenFiles,
		CPUTime:   units.Duration(sandbox.DefaultCPUTime),
	}}
}

// SandboxPolicy returns the runtime/sandbox policy of u's sandbox block (nil
// without one). The workspace roots are writable too.
func (u *Upstream) SandboxPolicy() *sandbox.Policy {
	s := u.Sandbox
	if s == nil {
		return nil
	}
	if s.Off != "" {
		return &sandbox.Policy{Off: s.Off}
	}
	p := &sandbox.Policy{
		Read:  append([]string(nil), s.FS.Read...),
		Write: append([]string(nil), s.FS.Write...),
		Allow: append([]string(nil), s.Net.Allow...),
		Limits: sandbox.Limits{
			Memory:    int64(s.Limits.Memory),
			Processes: int64(s.Limits.Processes),
			OpenFiles: int64(s.Limits.OpenFiles),
			CPUTime:   time.Duration(s.Limits.CPUTime),
		},
	}
	if u.Workspace != nil {
		p.Write = append(p.Write, u.Workspace.Roots...)
	}
	return p
}

// sandbox checks an upstream's sandbox block and resolves its paths.
func (c *checker) sandbox(ptr string, s *Sandbox, command bool) {
	if !command {
		c.fail(ptr, "is only valid with command or cli")
		return
	}
	if s.Off != "" {
		for _, k := range []string{"fs", "net", "env", "limits"} {
			if c.has(ptr + "/" + k) {
				c.fail(ptr+"/"+k, "off turns the sandbox off; remove %s or off", k)
			}
		}
		return
	}
	paths := func(sub string, ps []string) {
		for i, p := range ps {
			pp := ptr + "/fs/" + sub + "/" + strconv.Itoa(i)
			if p == "" {
				c.fail(pp, "must not be empty")
				continue
			}
			ps[i] = filepath.Clean(c.path(pp, p))
		}
	}
	paths("read", s.FS.Read)
	paths("write", s.FS.Write)
	for i, a := range s.Net.Allow {
		if _, err := egress.ParseRule(a); err != nil {
			c.fail(ptr+"/net/allow/"+strconv.Itoa(i), "must be a host name, *.suffix or IP literal, optionally with :port (%v)", err)
		}
	}
	c.size(ptr+"/limits/memory", s.Limits.Memory)
	c.duration(ptr+"/limits/cpu_time", s.Limits.CPUTime, true)
}

// sandboxOff is the written form of a sandbox turned off.
type sandboxOff struct {
	Off string `json:"off" yaml:"off"`
}

// plainSandbox is Sandbox without its marshalers.
type plainSandbox Sandbox

// MarshalJSON writes only off when the sandbox is off.
func (s Sandbox) MarshalJSON() ([]byte, error) {
	if s.Off != "" {
		return json.Marshal(sandboxOff{s.Off})
	}
	return json.Marshal(plainSandbox(s))
}

// MarshalYAML writes only off when the sandbox is off.
func (s Sandbox) MarshalYAML() (any, error) {
	if s.Off != "" {
		return sandboxOff{s.Off}, nil
	}
	return plainSandbox(s), nil
}
