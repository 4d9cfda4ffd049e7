package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion is set at link time (-ldflags "-X main.buildVersion=v1.2.3");
// without it the module's version is used ("(devel)" for a local build).
var buildVersion string

// version is kubevirt-ovn's version, its commit when the build recorded
// one, and the Go release and platform it was built for.
func version() string {
	v, commit := buildVersion, ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	out := "kubevirt-ovn " + v
	if commit != "" {
		out += " commit " + commit
	}
	return fmt.Sprintf("%s %s %s/%s", out, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kubevirt-ovn's version",
		Args:  noArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version())
		},
	}
}
