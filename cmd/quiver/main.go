// Command quiver is a progressive-disclosure gateway for the Model Context
// Protocol: it stands in front of a fleet of MCP servers and lets an agent
// browse, hydrate and execute their tools without paying for every schema in
// its context window.
//
// The command is thin: flags become a configuration, the configuration
// builds a runtime. See the README for the subcommands.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/sandbox"
	"github.com/quiver-mcp/quiver/runtime/state/redisstate"
	"github.com/spf13/cobra"
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks bad input from the command line or its files: exit 2.
func usageError(err error) error { return &exitError{code: 2, err: err} }

func main() {
	// Inside a sandbox, this binary is first the helper that applies the
	// limits and relays the egress proxy (runtime/sandbox).
	sandbox.RunHelper(os.Args)
	redisstate.DiscardDriverLogs()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit code: 0 on
// success, 1 when a check the user asked for failed, 2 on bad input.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	code := 2
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	fmt.Fprintln(stderr, "quiver: "+oneLine(err.Error()))
	return code
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "quiver",
		Short:         "A progressive-disclosure gateway for MCP tool fleets",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(),
	}
	root.SetVersionTemplate("quiver {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.AddCommand(newCatalogCmd())
	root.AddCommand(newBenchCmd())
	root.AddCommand(newConfigCmd())
	root.AddCommand(newServeCmd())
	root.AddCommand(newReceiptsCmd())
	root.AddCommand(newAdminCmd())
	root.AddCommand(newEvalCmd())
	root.AddCommand(newCapabilityCmd())
	root.AddCommand(newVersionCmd())
	root.AddCommand(newRegistryCmd())
	return root
}

// oneLine keeps error output to one line.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}
