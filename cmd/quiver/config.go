package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/quiver-mcp/quiver/internal/boundedread"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/mcpimport"
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
	var asJSON, connect bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate a configuration and print its effective settings",
		Long: `Validate a configuration file and print the effective settings: every key with
its default filled in, paths resolved, secrets shown only as the names of the
environment variables or files they come from. The registry manifests it
names are validated too, and their pinned version is printed on stderr, as are
the tool manifests of cli upstreams. Exit 0
when everything is valid, 2 with one line FILE:LINE:COL: field: message (or
MANIFEST: /pointer: message) when it is not. Each enabled command upstream's
program must resolve (on PATH, after ~ and ${HOME} are expanded) and each URL
must parse. With --connect every enabled upstream is also connected as serve
would (initialize, then tools/list) and reported on stderr with the protocol
revision it negotiated; exit 1 when one cannot be.

An MCP client's file (mcpServers or servers JSON) is checked as serve would
run it: converted as quiver config import does, in environment dev.

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
				if err := cfg.CheckPrograms(nil); err != nil {
					return usageError(err)
				}
			}
			// What serve would refuse at start fails the check too.
			for _, check := range []func() error{cfg.CheckTransport, cfg.CheckSandboxes} {
				if err := check(); err != nil {
					return usageError(err)
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
			if _, err = cmd.OutOrStdout().Write(out); err != nil || !connect {
				return err
			}
			return connectReport(cmd.Context(), cfg, cmd.ErrOrStderr())
		},
	}
	check.Flags().StringVar(&file, "config", "", "configuration file (YAML or JSON)")
	check.Flags().BoolVar(&asJSON, "json", false, "print the effective settings as JSON")
	check.Flags().BoolVar(&connect, "connect", false, "also connect every enabled upstream (initialize + tools/list) and report it")
	cmd.AddCommand(check, newConfigImportCmd())
	return cmd
}

// connectReport connects every enabled upstream once and prints one line
// per upstream; an upstream that fails makes it exit 1.
func connectReport(ctx context.Context, cfg *config.Config, w io.Writer) error {
	results, err := probe(ctx, cfg, w)
	if err != nil {
		return usageError(err)
	}
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
			fmt.Fprintf(w, "quiver: upstream %s (%s): FAILED: %s\n", r.Name, r.Transport, oneLine(r.Err.Error()))
			continue
		}
		if r.Protocol == "" {
			fmt.Fprintf(w, "quiver: upstream %s (%s): ok, %d tools\n", r.Name, r.Transport, len(r.Tools))
			continue
		}
		fmt.Fprintf(w, "quiver: upstream %s (%s): ok, protocol %s, server %s %s, %d tools\n", r.Name, r.Transport, r.Protocol,
			oneLine(r.ServerName), oneLine(r.ServerVersion), len(r.Tools))
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d upstreams could not be connected", failed, len(results))}
	}
	return nil
}

func newConfigImportCmd() *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Write the quiver configuration of an MCP client's server list",
		Long: `Read the mcpServers JSON of Claude Desktop, Cursor, Claude Code (.mcp.json) or
Windsurf, or VS Code's servers JSON (.vscode/mcp.json, with its inputs), and
write the equivalent quiver YAML with comments (to stdout, or --out FILE).

The result is a prod skeleton to review: environment prod, a sandbox block per
local server derived from its arguments (existing path arguments writable,
network only for its package registry and the hosts in its arguments), and
registry: [registry/*.yaml] for quiver registry init to fill. Secrets are never
written: a literal secret env value becomes ${NAME} (the same variable, read
from quiver's environment), a literal header value a variable named
QUIVER_<SERVER>_<HEADER>, and ${input:ID} the variable ID upper-cased; each is
named in a warning on stderr. Exit 2 with one line FILE: KEY: message for a
malformed or unknown file.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src := args[0]
			data, err := boundedread.File(src, mcpimport.MaxFileSize)
			if err != nil {
				return usageError(err)
			}
			outDir := filepath.Dir(out)
			if out == "" {
				outDir = "."
			}
			opts, err := mcpimport.Local(src, outDir)
			if err != nil {
				return usageError(err)
			}
			opts.Environment, opts.Skeleton = "prod", true
			res, err := mcpimport.Convert(src, data, opts)
			if err != nil {
				return usageError(err)
			}
			// What is written must load as it is.
			if _, err := config.Parse(src+" (converted)", res.YAML, opts.OutDir); err != nil {
				return usageError(err)
			}
			for _, w := range res.Warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "quiver: %s: %s\n", src, w)
			}
			if out == "" {
				_, err = cmd.OutOrStdout().Write(res.YAML)
				return err
			}
			flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
			if force {
				flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			}
			f, err := os.OpenFile(out, flags, 0o644)
			if err != nil {
				if errors.Is(err, fs.ErrExist) {
					return usageError(fmt.Errorf("%s exists; pass --force to overwrite it", out))
				}
				return usageError(err)
			}
			if _, err := f.Write(res.YAML); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "quiver: wrote %s (%s, %d servers); next: quiver registry init --config %s\n", out, res.Client, res.Servers, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the YAML to this file instead of stdout")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite --out when it exists")
	return cmd
}
