package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/eval"
	"github.com/spf13/cobra"
)

func newEvalCmd() *cobra.Command {
	var asJSON, noSandbox, verbose, useLLM bool
	var filter, dir string
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Run the adversarial eval suite of governed cli tools against this binary",
		Long: `Run the adversarial eval suite (spec 002 §3.4): build a sample git repository, serve the example
cli tools (examples/cli) with this binary, sandboxed by bubblewrap when it works here, and drive it over
MCP as a scripted hostile agent: unregistered tools, deletes and writes, option injection (--upload-pack,
--output), shell metacharacters, NUL bytes, newlines, globs, very long values, path traversal, a prompt
injection planted in a file, direct shells; then the capability cases and the audit checks on receipts.
Exits 1 when any case fails. With --llm, a model drives the same cases from their prompts through any
OpenAI-compatible endpoint (CI uses the scripted agent).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("locating this binary: %w", err)
			}
			var llm *eval.LLM
			if useLLM {
				if llm = eval.LLMFromEnv(); llm == nil {
					return usageError(fmt.Errorf("--llm needs %s and %s (and optionally %s) in the environment", eval.EnvLLMURL, eval.EnvLLMKey, eval.EnvLLMModel))
				}
			}
			sandboxed := !noSandbox && eval.BwrapUsable(cmd.Context())
			var logs bytes.Buffer
			results, err := eval.Run(cmd.Context(), eval.Options{Binary: self, Dir: dir, Sandbox: sandboxed, Filter: filter, Stderr: &logs, LLM: llm})
			if err != nil {
				if verbose {
					fmt.Fprint(cmd.ErrOrStderr(), logs.String())
				}
				return err
			}
			failed := 0
			out := cmd.OutOrStdout()
			for _, r := range results {
				if !r.Pass {
					failed++
				}
				if asJSON {
					if !verbose {
						r.Receipts = nil
					}
					b, err := json.Marshal(r)
					if err != nil {
						return err
					}
					fmt.Fprintln(out, string(b))
					continue
				}
				verdict := "PASS"
				if !r.Pass {
					verdict = "FAIL"
				}
				fmt.Fprintf(out, "%s  %-30s %-10s %d calls\n", verdict, r.Name, r.Kind, r.Calls)
				for _, f := range r.Failures {
					fmt.Fprintf(out, "      %s\n", f)
				}
				if verbose {
					for _, rc := range r.Receipts {
						fmt.Fprintf(out, "      receipt: %s\n", rc)
					}
				}
			}
			if !asJSON {
				mode := "sandbox: bwrap"
				if !sandboxed {
					mode = "sandbox: off (bubblewrap unusable here)"
				}
				fmt.Fprintf(out, "%d cases, %d failed (%s)\n", len(results), failed, mode)
			}
			if verbose && failed > 0 {
				fmt.Fprint(cmd.ErrOrStderr(), logs.String())
			}
			if len(results) == 0 {
				return usageError(errors.New("no case matches " + strings.TrimSpace(filter)))
			}
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d eval cases failed", failed, len(results))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON result per case")
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "run the tools without bubblewrap even where it works")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print each case's receipts, and the server log when a case fails")
	cmd.Flags().BoolVar(&useLLM, "llm", false, "let a model be the agent (an OpenAI-compatible endpoint from $"+eval.EnvLLMURL+", $"+eval.EnvLLMKey+", $"+eval.EnvLLMModel+"): each case's prompt instead of its scripted steps")
	cmd.Flags().StringVar(&filter, "case", "", "run only the cases whose name contains this")
	cmd.Flags().StringVar(&dir, "dir", "", "work directory (default: a temporary one, removed afterwards)")
	return cmd
}
