package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newAdminCmd is a thin client of the admin API (runtime/admin) that
// `quiver serve --http` mounts at /admin/v1/: incident mode, kill
// switches, revocations, quarantines and approvals.
func newAdminCmd() *cobra.Command {
	var base, tokenEnv string
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Operate a running gateway: incident mode, kill switch, revocations, quarantine, approvals",
	}
	cmd.PersistentFlags().StringVar(&base, "url", "http://127.0.0.1:8080", "base URL of the gateway's HTTP listener")
	cmd.PersistentFlags().StringVar(&tokenEnv, "token-env", "QUIVER_ADMIN_TOKEN", "environment variable holding the admin bearer token")

	// call sends one admin request and prints the JSON answer.
	call := func(cmd *cobra.Command, method, path string, body any) error {
		token, ok := os.LookupEnv(tokenEnv)
		if !ok || token == "" {
			return usageError(fmt.Errorf("$%s is not set: the admin API needs its bearer token", tokenEnv))
		}
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			if err != nil {
				return usageError(err)
			}
			rd = bytes.NewReader(b)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+"/admin/v1/"+path, rd)
		if err != nil {
			return usageError(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return err
		}
		if resp.StatusCode/100 != 2 {
			return &exitError{code: 1, err: fmt.Errorf("admin API: %s: %s", resp.Status, bytes.TrimSpace(data))}
		}
		_, err = fmt.Fprintln(cmd.OutOrStdout(), string(bytes.TrimSpace(data)))
		return err
	}
	leaf := func(use, short string, args cobra.PositionalArgs, run func(cmd *cobra.Command, a []string) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: args, RunE: run}
	}

	var reason, denyMinRisk string
	var egressBlock bool
	incident := &cobra.Command{Use: "incident", Short: "Show, enable or disable incident mode"}
	enable := leaf("enable", "Enable incident mode", cobra.NoArgs, func(c *cobra.Command, _ []string) error {
		return call(c, http.MethodPost, "incident", map[string]any{"reason": reason, "deny_min_risk": denyMinRisk, "egress_block": egressBlock})
	})
	enable.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	enable.Flags().StringVar(&denyMinRisk, "deny-min-risk", "", "deny tools of this risk and above (LOW|MEDIUM|HIGH|CRITICAL)")
	enable.Flags().BoolVar(&egressBlock, "egress-block", false, "also deny every call that reaches the network (tools with an egress allowlist or sandbox network, arguments naming a host) and make the sandboxes' egress proxies refuse everything")
	incident.AddCommand(
		leaf("show", "Show the incident state", cobra.NoArgs, func(c *cobra.Command, _ []string) error {
			return call(c, http.MethodGet, "incident", nil)
		}),
		enable,
		leaf("disable", "Disable incident mode", cobra.NoArgs, func(c *cobra.Command, _ []string) error {
			return call(c, http.MethodDelete, "incident", nil)
		}),
	)

	var rule string
	kill := &cobra.Command{Use: "kill", Short: "Add or remove kill-switch rules"}
	add := leaf("add", "Add a kill rule, e.g. --rule '{\"id\":\"k1\",\"server\":[\"github\"]}'", cobra.NoArgs, func(c *cobra.Command, _ []string) error {
		var body map[string]any
		if err := json.Unmarshal([]byte(rule), &body); err != nil {
			return usageError(fmt.Errorf("--rule: %w", err))
		}
		return call(c, http.MethodPost, "kill", body)
	})
	add.Flags().StringVar(&rule, "rule", "", "the rule as JSON: id, all, min_risk, tool_class, server, namespace, tool_id, reason")
	kill.AddCommand(add, leaf("remove ID", "Remove a kill rule", cobra.ExactArgs(1), func(c *cobra.Command, a []string) error {
		return call(c, http.MethodDelete, "kill/"+a[0], nil)
	}))

	revoke := &cobra.Command{Use: "revoke", Short: "Revoke a principal (sub or key) or a token (jti)"}
	restore := &cobra.Command{Use: "restore", Short: "Lift a revocation"}
	for _, kind := range []struct{ name, path, field string }{{"principal", "principals", "sub"}, {"token", "tokens", "jti"}} {
		revoke.AddCommand(leaf(kind.name+" ID", "Revoke a "+kind.name, cobra.ExactArgs(1), func(c *cobra.Command, a []string) error {
			return call(c, http.MethodPost, "revocations/"+kind.path, map[string]string{kind.field: a[0], "reason": reason})
		}))
		restore.AddCommand(leaf(kind.name+" ID", "Restore a "+kind.name, cobra.ExactArgs(1), func(c *cobra.Command, a []string) error {
			return call(c, http.MethodDelete, "revocations/"+kind.path+"/"+a[0], nil)
		}))
	}
	var capHolder, capKID string
	revokeCap := leaf("capability [JTI]", "Revoke a capability token by jti (and its attenuations), or every token of a holder (--holder) or signed by a key (--kid)", cobra.MaximumNArgs(1), func(c *cobra.Command, a []string) error {
		body := map[string]string{"reason": reason}
		n := 0
		if len(a) == 1 {
			body["jti"], n = a[0], n+1
		}
		if capHolder != "" {
			body["holder"], n = capHolder, n+1
		}
		if capKID != "" {
			body["kid"], n = capKID, n+1
		}
		if n != 1 {
			return usageError(fmt.Errorf("give exactly one of JTI, --holder and --kid"))
		}
		return call(c, http.MethodPost, "capabilities/revocations", body)
	})
	revokeCap.Flags().StringVar(&capHolder, "holder", "", "a holder's principal key (jwt:<issuer>:<sub>)")
	revokeCap.Flags().StringVar(&capKID, "kid", "", "a signing key's kid")
	revoke.AddCommand(revokeCap)
	revoke.PersistentFlags().StringVar(&reason, "reason", "", "why (recorded)")

	quarantine := leaf("quarantine SESSION", "Quarantine an MCP session", cobra.ExactArgs(1), func(c *cobra.Command, a []string) error {
		return call(c, http.MethodPost, "quarantine", map[string]string{"session_id": a[0], "reason": reason})
	})
	quarantine.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	release := leaf("release ID", "Release a quarantined session (session id) or principal (principal key, e.g. jwt:corp:alice)", cobra.ExactArgs(1), func(c *cobra.Command, a []string) error {
		return call(c, http.MethodDelete, "quarantine/"+url.PathEscape(a[0]), nil)
	})

	approvals := &cobra.Command{Use: "approvals", Short: "List, grant or deny approval requests"}
	approvals.AddCommand(
		leaf("list", "List pending approvals", cobra.NoArgs, func(c *cobra.Command, _ []string) error {
			return call(c, http.MethodGet, "approvals", nil)
		}),
		leaf("grant ID", "Grant an approval", cobra.ExactArgs(1), func(c *cobra.Command, a []string) error {
			return call(c, http.MethodPost, "approvals/"+a[0]+"/grant", map[string]string{})
		}),
		leaf("deny ID", "Deny an approval", cobra.ExactArgs(1), func(c *cobra.Command, a []string) error {
			return call(c, http.MethodPost, "approvals/"+a[0]+"/deny", map[string]string{})
		}),
	)
	capabilities := &cobra.Command{Use: "capabilities", Short: "List live capability tokens and their revocations"}
	capabilities.AddCommand(
		leaf("list", "List live capability tokens (ids, holders, thumbprints)", cobra.NoArgs, func(c *cobra.Command, _ []string) error {
			return call(c, http.MethodGet, "capabilities", nil)
		}),
		leaf("revocations", "List the capability revocation list", cobra.NoArgs, func(c *cobra.Command, _ []string) error {
			return call(c, http.MethodGet, "capabilities/revocations", nil)
		}),
		leaf("request APPROVAL_ID", "Show what a capability request awaiting approval asks for (tools, duration, uses, reason)", cobra.ExactArgs(1), func(c *cobra.Command, a []string) error {
			return call(c, http.MethodGet, "capabilities/requests/"+a[0], nil)
		}),
	)
	cmd.AddCommand(incident, kill, revoke, restore, quarantine, release, approvals, capabilities)
	return cmd
}
