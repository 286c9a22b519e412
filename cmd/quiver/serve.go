package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/quiver-mcp/quiver/runtime"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/reload"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	var (
		cfgFile, catalogFile, httpAddr   string
		env                              string
		gateway, proxy, direct, insecure bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the fleet over MCP (stdio by default, --http ADDR for streamable HTTP)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// flags puts the command line's choices over a loaded
			// configuration, at start and at every reload.
			flags := func(cfg *config.Config) *config.Config {
				switch {
				case gateway:
					cfg.Mode = config.ModeGateway
				case proxy:
					cfg.Mode = config.ModeProxy
				case direct:
					cfg.Mode = config.ModeDirect
				}
				if httpAddr != "" {
					cfg.Listen.Transport = config.TransportHTTP
					cfg.Listen.Addr = httpAddr
				}
				// --insecure and the file's insecure: true accept plain
				// HTTP off loopback, as the listener and toward upstreams.
				cfg.Insecure = cfg.Insecure || insecure
				return cfg
			}
			if btoi(gateway)+btoi(proxy)+btoi(direct) > 1 {
				return usageError(errors.New("give one of --gateway, --proxy and --direct"))
			}
			var cfg *config.Config
			var load func() (*config.Config, error)
			switch {
			case cfgFile != "" && catalogFile != "":
				return usageError(errors.New("give --config or --catalog, not both"))
			case cfgFile != "":
				switch guard.Environment(env) {
				case "", guard.EnvDev, guard.EnvProd:
				default:
					return usageError(fmt.Errorf("--env must be dev or prod, not %q", env))
				}
				// A reload reads the file as the start did: a client's
				// file keeps the --env it was served with.
				load = func() (*config.Config, error) {
					c, err := config.LoadWith(cfgFile, config.LoadOptions{Environment: guard.Environment(env)})
					if err != nil {
						return nil, err
					}
					return flags(c), nil
				}
				c, err := load()
				if err != nil {
					return usageError(err)
				}
				if c.Imported == nil && env != "" {
					return usageError(fmt.Errorf("--env applies to an MCP client's file; %s is quiver's own: set environment in it", cfgFile))
				}
				announceImport(cmd.ErrOrStderr(), cfgFile, c)
				cfg = c
			case catalogFile != "":
				cfg = flags(config.FromCatalog(catalogFile))
			default:
				return usageError(errors.New("give --config FILE or --catalog FILE"))
			}
			if cfg.Listen.Transport == config.TransportHTTP && cfg.Listen.TLS == nil && !cfg.Insecure && !loopback(cfg.Listen.Addr) {
				return usageError(fmt.Errorf("refusing to serve HTTP on non-loopback address %s without TLS: configure listen.tls or pass --insecure", cfg.Listen.Addr))
			}
			return serve(cmd.Context(), cfg, load, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgFile, "config", "", "configuration file (YAML or JSON)")
	f.StringVar(&env, "env", "", "environment of an MCP client's file given to --config: dev (default) or prod")
	f.StringVar(&catalogFile, "catalog", "", "serve a static catalog file without a configuration")
	f.BoolVar(&gateway, "gateway", false, "gateway mode: meta-tools only, tools found with tool_browse")
	f.BoolVar(&proxy, "proxy", false, "transparent proxy mode: every tool listed as a stripped entry")
	f.BoolVar(&direct, "direct", false, "direct mode: every upstream tool, prompt and resource listed with its real definition (names prefixed by tool_prefix)")
	f.BoolVar(&insecure, "insecure", false, "allow plain HTTP off loopback: listening without TLS, and http:// url or sse upstreams")
	f.StringVar(&httpAddr, "http", "", "serve streamable HTTP on ADDR (path /mcp, plus /healthz and /metrics) instead of stdio")
	return cmd
}

// serve builds the runtime from cfg and serves it until the client leaves
// (stdio) or SIGINT/SIGTERM arrives; upstream children are reaped on the
// way out. SIGHUP and changes of the configuration file reload it with
// load (nil: there is no file to reload).
func serve(parent context.Context, cfg *config.Config, load func() (*config.Config, error), logOut interface{ Write([]byte) (int, error) }) error {
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// SIGHUP would end the process; it asks for a reload instead.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	// Logs go to stderr: on stdio, stdout carries the protocol.
	hopts := &slog.HandlerOptions{Level: cfg.Log.SlogLevel()}
	var handler slog.Handler = slog.NewTextHandler(logOut, hopts)
	if cfg.Log.Format == "json" {
		handler = slog.NewJSONHandler(logOut, hopts)
	}
	log := slog.New(handler)

	// The port is bound before anything starts: a busy port fails at once,
	// and /healthz answers while the upstreams come up.
	var ln net.Listener
	if cfg.Listen.Transport == config.TransportHTTP {
		l, err := net.Listen("tcp", cfg.Listen.Addr)
		if err != nil {
			return usageError(fmt.Errorf("listen.addr %s: %w", cfg.Listen.Addr, err))
		}
		ln = l
		defer ln.Close()
	}
	rt, err := runtime.New(cfg, runtime.Deps{Logger: log, Version: buildVersion()})
	if err != nil {
		return usageError(err)
	}
	defer rt.Close()
	if err := rt.Start(ctx); err != nil {
		return err
	}
	rctx, stopReload := context.WithCancel(ctx)
	var reloads sync.WaitGroup
	defer reloads.Wait()
	defer stopReload()
	reloads.Go(func() {
		if load == nil {
			for {
				select {
				case <-hup:
					log.Warn("reload requested, but quiver serves without a configuration file; nothing to reload")
				case <-rctx.Done():
					return
				}
			}
		}
		reload.Run(rctx, rt, reload.Options{File: cfg.Source, Load: load, Signals: hup, Logger: log})
	})
	switch cfg.Listen.Transport {
	case config.TransportHTTP:
		o := runtime.HTTPOptions{Listener: ln, Path: cfg.Listen.Path}
		scheme := "http"
		if cfg.Listen.TLS != nil {
			o.CertFile, o.KeyFile, scheme = cfg.Listen.TLS.Cert, cfg.Listen.TLS.Key, "https"
		}
		o.Ready = func(a net.Addr) {
			log.Info("serving streamable HTTP", "addr", a.String(), "path", cfg.Listen.Path, "mode", string(cfg.Mode), "tls", scheme == "https")
			fmt.Fprintf(logOut, "quiver: listening on %s://%s%s\n", scheme, a.String(), cfg.Listen.Path)
		}
		return rt.ServeHTTP(ctx, o)
	default:
		log.Info("serving stdio", "mode", string(cfg.Mode))
		return rt.ServeStdio(ctx)
	}
}

// announceImport says on stderr that cfg comes from an MCP client's file,
// in which environment it runs and what the conversion moved.
func announceImport(w io.Writer, file string, cfg *config.Config) {
	im := cfg.Imported
	if im == nil {
		return
	}
	disabled := ""
	if im.Disabled > 0 {
		disabled = fmt.Sprintf(", %d disabled", im.Disabled)
	}
	fmt.Fprintf(w, "quiver: %s is an MCP client's file (%s: %s, %d servers%s), served in environment %s", file, im.Dialect, im.Client, im.Servers, disabled, cfg.Environment)
	if cfg.Environment == guard.EnvDev {
		fmt.Fprintf(w, ": tools are allowed without a registry classification and no server is sandboxed; for prod: quiver config import %s --out quiver.yaml\n", file)
	} else {
		fmt.Fprintf(w, ": each local server in its derived sandbox, and no registry, so every tool call is denied; write a configuration with quiver config import %s --out quiver.yaml and manifests with quiver registry init\n", file)
	}
	for _, m := range im.Warnings {
		fmt.Fprintf(w, "quiver: %s: %s\n", file, m)
	}
}

// loopback reports whether addr (host:port) listens on a loopback address
// only: localhost or a loopback IP. An empty or unspecified host listens on
// every interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
