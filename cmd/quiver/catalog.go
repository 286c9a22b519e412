package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/spf13/cobra"
)

func newCatalogCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Inspect a tool catalog file: ids, cards, lint",
	}
	var file string
	var strict bool
	cmd.PersistentFlags().StringVar(&file, "catalog", "", "catalog file: JSON Lines of tools, a tools/list result, or a snapshot object")
	cmd.PersistentFlags().BoolVar(&strict, "strict", false, "reject the catalog on any error finding")

	load := func() (*catalog.Snapshot, catalog.Report, *choicecard.Builder, error) {
		if file == "" {
			return nil, catalog.Report{}, nil, usageError(errors.New("--catalog FILE is required"))
		}
		src, err := catalog.LoadFile(file)
		if err != nil {
			return nil, catalog.Report{}, nil, usageError(err)
		}
		cards, err := choicecard.NewDefaultBuilder()
		if err != nil {
			return nil, catalog.Report{}, nil, err
		}
		snap, rep, err := catalog.Ingest(src, catalog.Options{Cards: cards, Strict: strict})
		if errors.Is(err, catalog.ErrRejected) {
			return nil, rep, cards, &exitError{code: 1, err: fmt.Errorf("%s: %w (run quiver catalog lint)", file, err)}
		}
		return snap, rep, cards, err
	}

	ids := &cobra.Command{
		Use:   "ids",
		Short: "Print one JSON line per item: server, name, kind, tool_id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			snap, _, _, err := load()
			if err != nil {
				return err
			}
			return writeLines(cmd.OutOrStdout(), func(emit func(any) error) error {
				for _, it := range snap.All() {
					name := it.UpstreamName
					if it.Resource != nil {
						name = it.Resource.Name
					}
					if err := emit(idLine{Server: it.Server, Name: name, Kind: string(it.Kind), ToolID: it.ID}); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}

	var text bool
	cardsCmd := &cobra.Command{
		Use:   "cards",
		Short: "Print one JSON line per card with its rendered token count (--text: the rendered form)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			snap, _, cards, err := load()
			if err != nil {
				return err
			}
			if text {
				w := bufio.NewWriter(cmd.OutOrStdout())
				for _, it := range snap.All() {
					fmt.Fprintln(w, choicecard.Render(it.Card))
				}
				return w.Flush()
			}
			return writeLines(cmd.OutOrStdout(), func(emit func(any) error) error {
				for _, it := range snap.All() {
					if err := emit(cardLine{Card: it.Card, Tokens: cards.Tokens(it.Card)}); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cardsCmd.Flags().BoolVar(&text, "text", false, "print the prompt-facing rendered form")

	var asJSON bool
	lint := &cobra.Command{
		Use:   "lint",
		Short: "Print the ingest report; with --strict, exit 1 on error findings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, rep, _, err := load()
			var ee *exitError
			if err != nil && !(errors.As(err, &ee) && ee.code == 1) {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				if werr := enc.Encode(rep); werr != nil {
					return werr
				}
			} else {
				printReport(out, file, rep)
			}
			return err
		},
	}
	lint.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")

	cmd.AddCommand(ids, cardsCmd, lint)
	return cmd
}

type idLine struct {
	Server string `json:"server"`
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	ToolID string `json:"tool_id"`
}

type cardLine struct {
	choicecard.Card
	Tokens int `json:"tokens"`
}

func writeLines(out io.Writer, each func(emit func(any) error) error) error {
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := each(enc.Encode); err != nil {
		return err
	}
	return w.Flush()
}

func printReport(out io.Writer, file string, rep catalog.Report) {
	w := bufio.NewWriter(out)
	defer w.Flush()
	fmt.Fprintf(w, "%s: %d tools, %d resources, %d prompts from %d servers; %d dropped; %d errors, %d warnings\n",
		file, rep.Tools, rep.Resources, rep.Prompts, rep.Servers, rep.Dropped, rep.Errors, rep.Warnings)
	for _, f := range rep.Findings {
		who := f.Name
		if f.Server != "" {
			who = f.Server + "/" + f.Name
		}
		fmt.Fprintf(w, "%s %s %s %q: %s\n", f.Severity, f.Code, f.Kind, who, f.Message)
	}
}
