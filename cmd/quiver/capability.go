package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/quiver-mcp/quiver/runtime/capability"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/spf13/cobra"
)

// newCapabilityCmd manages the keyring that signs capability tokens:
// list its public keys, rotate (add a new signing key) and retire an old
// one. Running gateways notice the change within seconds.
func newCapabilityCmd() *cobra.Command {
	var cfgFile, keyFile string
	cmd := &cobra.Command{Use: "capability", Short: "Manage the keys that sign capability tokens (spec 004)"}
	cmd.PersistentFlags().StringVar(&cfgFile, "config", "", "configuration file (its capabilities.key_file or state_dir names the keyring)")
	cmd.PersistentFlags().StringVar(&keyFile, "key-file", "", "the keyring file itself")
	path := func() (string, error) {
		if keyFile != "" {
			return keyFile, nil
		}
		cfg := config.Default()
		file := cfgFile
		if file == "" {
			file = findConfig()
		}
		if file != "" {
			c, err := config.Load(file)
			if err != nil {
				return "", usageError(err)
			}
			cfg = c
		}
		switch {
		case cfg.Capabilities.KeyFile != "":
			return cfg.Capabilities.KeyFile, nil
		case cfg.StateDir != "":
			return filepath.Join(cfg.StateDir, "capability-keys.json"), nil
		}
		return "", usageError(errors.New("no state directory is known: give --key-file"))
	}
	keys := &cobra.Command{Use: "keys", Short: "List, rotate or retire signing keys"}
	keys.AddCommand(
		&cobra.Command{Use: "list", Short: "Print the public key set (the last key signs)", Args: cobra.NoArgs, RunE: func(c *cobra.Command, _ []string) error {
			p, err := path()
			if err != nil {
				return err
			}
			k, err := capability.OpenKeyring(p)
			if err != nil {
				return err
			}
			out, err := json.MarshalIndent(k.JWKS(), "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(c.OutOrStdout(), string(out))
			return err
		}},
		&cobra.Command{Use: "rotate", Short: "Add a new signing key; older keys keep verifying the tokens they signed", Args: cobra.NoArgs, RunE: func(c *cobra.Command, _ []string) error {
			p, err := path()
			if err != nil {
				return err
			}
			kid, err := capability.RotateKeyFile(p)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(c.OutOrStdout(), kid)
			return err
		}},
		&cobra.Command{Use: "retire KID", Short: "Remove a key: the tokens it signed no longer verify", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, a []string) error {
			p, err := path()
			if err != nil {
				return err
			}
			return capability.RetireKey(p, a[0])
		}},
	)
	cmd.AddCommand(keys)
	return cmd
}
