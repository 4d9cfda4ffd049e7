// Command kubevirt-ovn translates KubeVirt virtual routers into OVN
// Northbound rows. Its subcommands are its roles:
//
//	kubevirt-ovn sync       (--nb ADDR [--sb ADDR] | --zone NAME=NB,SB...) --from-file PATH...
//	kubevirt-ovn run        --nb ADDR [--sb ADDR] [--kubeconfig PATH | --from-file PATH...]
//	kubevirt-ovn allocator  [--kubeconfig PATH] --namespace NS
//	kubevirt-ovn zone-agent --zone-nb ADDR --zone-sb ADDR [--kubeconfig PATH]
//	kubevirt-ovn status     --nb ADDR --sb ADDR [--kubeconfig PATH] [-o text|json|yaml]
//	kubevirt-ovn rebalance  --nb ADDR --sb ADDR [--dry-run]
//	kubevirt-ovn trace      (--nb ADDR --sb ADDR | --zone NAME=NB,SB...) --from VM|IP --to DEST
//	kubevirt-ovn version
//	kubevirt-ovn completion bash|zsh|fish|powershell
//
// This package only parses flags and wires the packages of translator/
// together; kubevirt-ovn COMMAND --help says what each flag does.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func main() {
	applyContainerMemoryLimit()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses: a command failed, its flags or arguments are wrong, and
// sync wrote every row but a zone's ovn-northd gave one of ours another
// tunnel key than the one it requests.
const (
	exitFailure      = 1
	exitUsage        = 2
	exitKeyCollision = 3
)

// run runs the command line args, printing to stdout and stderr, and
// returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run until ctx ends (the long-running commands also stop on
// SIGINT and SIGTERM).
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetContext(ctx)
	root.SetArgs(singleDashLongFlags(root, args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	var ex *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ex):
		if ex.err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), ex.err)
		}
		return ex.code
	default:
		// cobra's, or a usage error of the command: a flag, an argument,
		// a missing command.
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", cmd.CommandPath(), err, cmd.CommandPath())
		return exitUsage
	}
}

// exitError ends a command with an exit status; err, when not nil, is
// printed after the command's name.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError is a command's usage error (exit status 2): a combination of
// flags that does not go together, a flag that is missing.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// runE adapts a command's function: its usage errors keep exit status 2,
// every other error is a failure (1), printed after the command's name.
func runE(f func(cmd *cobra.Command) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		err := f(cmd)
		var ue *usageError
		var ex *exitError
		switch {
		case err == nil, errors.As(err, &ue), errors.As(err, &ex):
			return err
		}
		return &exitError{exitFailure, err}
	}
}

// noArgs refuses positional arguments: every input is a flag.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q: %s takes flags only", args[0], cmd.CommandPath())
	}
	return nil
}

// unknownCommand refuses an argument of kubevirt-ovn that is no command,
// suggesting one that is close.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return errors.New(msg)
}

// singleDashLongFlags rewrites the single-dash spellings of long flags
// that Go's flag package accepted, and that scripts still use (-nb ADDR,
// -from-file=PATH), to double dashes (--nb ADDR): a single dash followed
// by the name of one of the command's flags that is not also a
// one-letter shorthand. Flag values (the argument after a flag that takes
// one) and everything after "--" are left alone.
func singleDashLongFlags(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		cmd = root
	}
	cmd.InitDefaultHelpFlag()
	lookup := func(name string) *pflag.Flag {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f
		}
		return cmd.InheritedFlags().Lookup(name)
	}
	shorthand := func(name string) bool {
		return len(name) == 1 && (cmd.Flags().ShorthandLookup(name) != nil || cmd.InheritedFlags().ShorthandLookup(name) != nil)
	}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 1 {
			name, _, _ := strings.Cut(a[1:], "=")
			if lookup(name) != nil && !shorthand(name) {
				a = "-" + a
			}
		}
		out = append(out, a)
		// The next argument is this flag's value: leave it as it is.
		if name, ok := strings.CutPrefix(a, "--"); ok && !strings.Contains(name, "=") {
			if f := lookup(name); f != nil && f.NoOptDefVal == "" && i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
		}
	}
	return out
}

// newRoot is kubevirt-ovn and its commands.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "kubevirt-ovn",
		Short: "Translate KubeVirt virtual routers into OVN Northbound rows",
		Long: `kubevirt-ovn translates KubeVirt virtual routers (VirtualRouters, the networks of
NetworkAttachmentDefinitions and the interfaces of VirtualMachineInstances, as ONOS'
kubevirt-networking accepted them) into rows of the OVN Northbound database. It writes
rows, not flows: ovn-controller does the datapath work. Every row it writes carries its
owner keys in external_ids; a row without them is never updated or deleted.

Once, from manifests on disk: sync. Continuously, from a cluster or from files: run. In a
cluster whose OVN has one NB per zone (ovn-kubernetes' interconnect mode): one allocator
and a zone agent on every node. Gateways: status and rebalance. A VM's packet's path, in
these objects: trace.`,
		Example: `  # Write the examples into a local NB, reading gateway chassis from the SB
  kubevirt-ovn sync --nb unix:/var/run/ovn/ovnnb_db.sock --sb unix:/var/run/ovn/ovnsb_db.sock --from-file deploy/examples

  # A command's flags
  kubevirt-ovn run --help`,
		Args:          unknownCommand,
		SilenceErrors: true,
		SilenceUsage:  true,
		// --version: the version. Without a command: its usage, on
		// stderr, and exit status 2.
		RunE: func(cmd *cobra.Command, _ []string) error {
			if v, _ := cmd.Flags().GetBool("version"); v {
				fmt.Fprintln(cmd.OutOrStdout(), version())
				return nil
			}
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return &exitError{code: exitUsage}
		},
	}
	root.SetGlobalNormalizationFunc(wordSeparators)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	// Not cobra's Version field: its version template would link text/template,
	// which keeps every exported method in the binary (29 MB more).
	root.Flags().BoolP("version", "v", false, "print kubevirt-ovn's version, as 'kubevirt-ovn version' does")
	root.AddGroup(&cobra.Group{ID: "sync", Title: "Write the NB:"}, &cobra.Group{ID: "cluster", Title: "Interconnect roles in a cluster:"},
		&cobra.Group{ID: "gateways", Title: "Gateways:"}, &cobra.Group{ID: "troubleshoot", Title: "Troubleshoot:"})
	for _, c := range []*cobra.Command{newSyncCmd(), newRunCmd(), newAllocatorCmd(), newZoneAgentCmd(), newStatusCmd(), newRebalanceCmd(), newTraceCmd(), newVersionCmd()} {
		root.AddCommand(c)
	}
	return root
}
