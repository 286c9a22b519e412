package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/upstream/cli"
	"github.com/spf13/cobra"
)

// configSearchPaths lists where `quiver config check` looks for a
// configuration when --config is not given, in order: quiver.yaml,
// quiver.yml and quiver.json in the working directory, then
// $XDG_CONFIG_HOME/quiver/config.yaml (default ~/.config/quiver/config.yaml).
func configSearchPaths() []string {
	paths := []string{"quiver.yaml", "quiver.yml", "quiver.json"}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(dir) {
		if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".config")
		} else {
			dir = ""
		}
	}
	if dir != "" {
		paths = append(paths, filepath.Join(dir, "quiver", "config.yaml"))
	}
	return paths
}

// findConfig returns the first existing file of configSearchPaths, or "".
func findConfig() string {
	for _, p := range configSearchPaths() {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with the configuration file of quiver serve",
	}
	var file string
	var asJSON bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate a configuration and print its effective settings",
		Long: `Validate a configuration file and print the effective settings: every key with
its default filled in, paths resolved, secrets shown only as the names of the
environment variables or files they come from. The registry manifests it
names are validated too, and their pinned version is printed on stderr, as are
the tool manifests of cli upstreams. Exit 0
when everything is valid, 2 with one line FILE:LINE:COL: field: message (or
MANIFEST: /pointer: message) when it is not.

Without --config, the first of quiver.yaml, quiver.yml, quiver.json (in the
working directory) and $XDG_CONFIG_HOME/quiver/config.yaml is checked; when
none exists, the built-in defaults are printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := file
			if path == "" {
				path = findConfig()
			}
			var cfg *config.Config
			if path == "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "quiver: no configuration file found; showing the built-in defaults")
				cfg = config.Default()
			} else {
				var err error
				if cfg, err = config.Load(path); err != nil {
					if errors.Is(err, config.ErrInvalid) {
						return usageError(err)
					}
					return err
				}
			}
			// The registry manifests are part of the configuration: a
			// broken one fails the check, a valid set is named by the
			// version quiver pins at start.
			if len(cfg.Registry) > 0 {
				reg, err := guard.LoadRegistry(cfg.Registry)
				if err != nil {
					return usageError(err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "quiver: registry %s (%d manifests, %d tools)\n", reg.Version(), reg.Manifests(), reg.Tools())
			}
			// So are the tool manifests of cli upstreams.
			for _, u := range cfg.Upstreams {
				if u.CLI == nil {
					continue
				}
				ms, err := cli.Load(u.CLI.Manifests, cfg.Dir, u.CLI.AllowedCommands)
				if err != nil {
					return usageError(fmt.Errorf("upstream %q: %w", u.Name, err))
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "quiver: cli upstream %s: %d tools\n", u.Name, len(ms))
			}
			out, err := cfg.Effective()
			if asJSON {
				out, err = cfg.EffectiveJSON()
			}
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	check.Flags().StringVar(&file, "config", "", "configuration file (YAML or JSON)")
	check.Flags().BoolVar(&asJSON, "json", false, "print the effective settings as JSON")
	cmd.AddCommand(check)
	return cmd
}
