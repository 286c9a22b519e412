package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/quiver-mcp/quiver/runtime"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/registrygen"
	"github.com/quiver-mcp/quiver/toolid"
	"github.com/spf13/cobra"
)

func newRegistryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Draft tool_registry manifests from the fleet, and check the fleet against them",
	}
	var (
		cfgFile, out string
		force        bool
	)
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Connect to the fleet and draft one manifest per upstream for review",
		Long: `Connect to every enabled upstream of the configuration (as serve would: the
same transports, credentials and sandboxes), list its tools, and write one
tool_registry manifest per upstream, OUT/<upstream>.yaml (OUT: registry beside
the configuration file by default), plus OUT/` + registrygen.LockName + `
(what the tools looked like, for registry diff). Each tool is classified from its
annotations and never guessed read: readOnlyHint -> read; destructiveHint or no
hint -> write. Document specs are left to you; each manifest's header comment
says what to review. Existing manifests are not overwritten without --force.
Exit 0 when every upstream was listed, 1 when some could not be (their
manifests are not written), 2 on bad input.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadForFleet(cfgFile)
			if err != nil {
				return err
			}
			out := registryDir(cfg, out)
			results, err := probe(cmd.Context(), cfg, cmd.ErrOrStderr())
			if err != nil {
				return usageError(err)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return usageError(err)
			}
			var servers []registrygen.Server
			failed := 0
			parser, err := guard.NewManifestParser()
			if err != nil {
				return err
			}
			type file struct {
				path string
				data []byte
			}
			var files []file
			for _, r := range results {
				if r.Err != nil {
					failed++
					fmt.Fprintf(cmd.ErrOrStderr(), "quiver: %s: not listed: %s\n", r.Name, oneLine(r.Err.Error()))
					continue
				}
				s := serverOf(r)
				servers = append(servers, s)
				path := filepath.Join(out, manifestName(r.Name))
				data := registrygen.Manifest(s)
				// A draft is checked as serve will read it.
				if _, err := parser.Parse(path, data); err != nil {
					return fmt.Errorf("drafted manifest: %w", err)
				}
				files = append(files, file{path, data})
			}
			lockPath := filepath.Join(out, registrygen.LockName)
			if !force {
				for _, f := range append(files, file{path: lockPath}) {
					if _, err := os.Stat(f.path); err == nil {
						return usageError(fmt.Errorf("%s exists: it may hold your review; pass --force to overwrite it", f.path))
					}
				}
			}
			lock, err := registrygen.NewLock(servers).Marshal()
			if err != nil {
				return err
			}
			for _, f := range append(files, file{lockPath, lock}) {
				if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
					return err
				}
			}
			for _, s := range servers {
				reads := 0
				for _, t := range s.Tools {
					if c, _ := registrygen.Classify(t.Annotations); c == guard.ClassRead {
						reads++
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %d tools (%d read, %d write)\n", filepath.Join(out, manifestName(s.Name)), len(s.Tools), reads, len(s.Tools)-reads)
			}
			glob := filepath.Join(out, "*.yaml")
			if rel, err := filepath.Rel(cfg.Dir, glob); err == nil && !strings.HasPrefix(rel, "..") {
				glob = rel
			}
			fmt.Fprintf(cmd.OutOrStdout(), "review them, then list them in the configuration: registry: [%s]\n", filepath.ToSlash(glob))
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d upstreams could not be listed; run registry init again when they are up", failed)}
			}
			return nil
		},
	}
	initCmd.Flags().StringVar(&cfgFile, "config", "", "configuration file (quiver YAML, or an MCP client's JSON)")
	initCmd.Flags().StringVar(&out, "out", "", "directory the manifests are written to (default: registry beside the configuration file)")
	initCmd.Flags().BoolVar(&force, "force", false, "overwrite existing manifests and lock")

	var diffCfg, dir string
	diffCmd := &cobra.Command{
		Use:   "diff",
		Short: "Report tools that appeared, vanished or changed since registry init",
		Long: `Connect to the fleet as registry init does and compare its tools with
DIR/` + registrygen.LockName + `: a tool that appeared (unclassified until a manifest lists it),
vanished, or changed its input schema (sha256 of its canonical JSON) or its
annotations. Exit 0 when nothing changed, 1 when something did (as diff), 2 on
error, an upstream that cannot be listed included.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadForFleet(diffCfg)
			if err != nil {
				return err
			}
			lockPath := filepath.Join(registryDir(cfg, dir), registrygen.LockName)
			lock, err := registrygen.ReadLock(lockPath)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return usageError(fmt.Errorf("%s does not exist: run quiver registry init first", lockPath))
				}
				return usageError(err)
			}
			results, err := probe(cmd.Context(), cfg, cmd.ErrOrStderr())
			if err != nil {
				return usageError(err)
			}
			var servers []registrygen.Server
			var down []string
			for _, r := range results {
				if r.Err != nil {
					down = append(down, r.Name+": "+oneLine(r.Err.Error()))
					continue
				}
				servers = append(servers, serverOf(r))
			}
			if len(down) > 0 {
				return usageError(fmt.Errorf("cannot compare upstreams that were not listed: %s", strings.Join(down, "; ")))
			}
			changes := registrygen.Diff(lock, servers)
			for _, c := range changes {
				fmt.Fprintln(cmd.OutOrStdout(), c.String())
			}
			if len(changes) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d differences from %s", len(changes), lockPath)}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "quiver: the fleet matches %s\n", lockPath)
			return nil
		},
	}
	diffCmd.Flags().StringVar(&diffCfg, "config", "", "configuration file (quiver YAML, or an MCP client's JSON)")
	diffCmd.Flags().StringVar(&dir, "dir", "", "directory registry init wrote to (default: registry beside the configuration file)")
	cmd.AddCommand(initCmd, diffCmd)
	return cmd
}

// registryDir is the directory given, else registry/ beside the
// configuration file, where its registry glob looks.
func registryDir(cfg *config.Config, given string) string {
	if given != "" {
		return given
	}
	return filepath.Join(cfg.Dir, "registry")
}

// manifestName is the file name of an upstream's manifest.
func manifestName(upstream string) string {
	ns := toolid.Namespace(upstream)
	if ns == "" {
		ns = "server"
	}
	return ns + ".yaml"
}

// loadForFleet loads the configuration registry init and diff connect to.
func loadForFleet(file string) (*config.Config, error) {
	if file == "" {
		if file = findConfig(); file == "" {
			return nil, usageError(errors.New("give --config FILE"))
		}
	}
	cfg, err := config.Load(file)
	if err != nil {
		return nil, usageError(err)
	}
	return cfg, nil
}

// probe connects the fleet once, logging warnings only.
func probe(ctx context.Context, cfg *config.Config, logOut io.Writer) ([]runtime.ProbeResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return runtime.Probe(ctx, cfg, runtime.Deps{Logger: log, Version: buildVersion()})
}

// serverOf is the registrygen view of a probed upstream.
func serverOf(r runtime.ProbeResult) registrygen.Server {
	s := registrygen.Server{Name: r.Name, Version: r.ServerVersion, Protocol: r.Protocol}
	for _, t := range r.Tools {
		s.Tools = append(s.Tools, registrygen.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Annotations: t.Annotations})
	}
	return s
}
