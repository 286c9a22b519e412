package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// stamped is set at build time with -ldflags "-X main.stamped=v1.2.3"; a
// release build says what it is, every other build says where it came from.
var stamped string

// buildVersion is quiver's version: the stamped one, else the module
// version a `go install ...@version` records, else "devel" with the VCS
// revision the go command recorded (and "+dirty" for a modified tree).
func buildVersion() string {
	if stamped != "" {
		return stamped
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return "devel-" + rev
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print quiver's version and the Go version it was built with",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := "go?"
			if bi, ok := debug.ReadBuildInfo(); ok {
				v = bi.GoVersion
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "quiver %s (%s)\n", buildVersion(), v)
			return err
		},
	}
}
