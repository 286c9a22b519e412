package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/quiver-mcp/quiver/runtime/egress"
)

// HelperArg is the hidden first argument that makes a binary whose main
// calls RunHelper act as the sandbox's init helper.
const HelperArg = "__quiver-sandbox-init"

// helperConfig is the helper's second argument (JSON). It carries no
// secret: it is visible to the sandboxed process.
type helperConfig struct {
	Limits  helperLimits   `json:"limits"`
	Forward *helperForward `json:"forward,omitempty"`
}

// helperLimits are the rlimits to set (soft = hard).
type helperLimits struct {
	Data       int64 `json:"data"`
	NProc      int64 `json:"nproc"`
	NoFile     int64 `json:"nofile"`
	CPUSeconds int64 `json:"cpu"`
}

// helperForward is the in-sandbox TCP listener relayed to the egress
// proxy's Unix socket.
type helperForward struct {
	Listen string `json:"listen"`
	Socket string `json:"socket"`
}

func (c helperConfig) encode() (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("helper config: %w", err)
	}
	return string(b), nil
}

// RunHelper runs the sandbox helper and exits when args (os.Args) select
// it (args[1] == HelperArg); otherwise it returns at once. Call it first
// in main (and in TestMain of tests whose binary serves as the helper).
func RunHelper(args []string) {
	if len(args) < 2 || args[1] != HelperArg {
		return
	}
	if len(args) < 4 {
		fmt.Fprintln(os.Stderr, "quiver sandbox helper: usage: "+HelperArg+" CONFIG PROGRAM [ARG...]")
		os.Exit(127)
	}
	if err := runHelper(args[2], args[3:]); err != nil {
		fmt.Fprintln(os.Stderr, "quiver sandbox helper:", err)
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.ExitCode())
		}
		os.Exit(127)
	}
	os.Exit(0)
}

// runHelper applies the limits and then either execs argv (no forwarder)
// or starts the forwarder and runs argv as its child until it exits.
func runHelper(cfgJSON string, argv []string) error {
	var cfg helperConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("program: %w", err)
	}
	if cfg.Forward == nil {
		if err := setLimits(cfg.Limits); err != nil {
			return err
		}
		if err := syscall.Exec(prog, argv, os.Environ()); err != nil {
			return fmt.Errorf("exec %s: %w", argv[0], err)
		}
		return nil
	}
	// The forwarder is the helper's own and runs without the limits; the
	// command is started through the helper once more, without the
	// forwarder, which applies them and execs it.
	ln, err := net.Listen("tcp", cfg.Forward.Listen)
	if err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	sock := cfg.Forward.Socket
	cfg.Forward = nil
	inner, err := cfg.encode()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("helper: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go forward(ctx, ln, sock) // ends when ln is closed (process exit)
	cmd := exec.Command(self, append([]string{HelperArg, inner}, argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		// Ends with the helper, which exits right after the child.
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	_ = ln.Close()
	return err
}

// forward relays every connection accepted on ln to the Unix socket.
func forward(ctx context.Context, ln net.Listener, sock string) {
	var d net.Dialer
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			// Owned by the connection: ends when either side closes.
			u, err := d.DialContext(ctx, "unix", sock)
			if err != nil {
				_ = c.Close()
				return
			}
			egress.Relay(c, u)
		}()
	}
}
