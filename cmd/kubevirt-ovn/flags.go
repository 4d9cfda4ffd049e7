package main

import (
	"errors"
	goflag "flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// The flag groups of --help, in the order they are shown.
const (
	groupDatabases = "OVN databases"
	groupZone      = "Zone databases"
	groupInput     = "Input"
	groupCluster   = "Cluster"
	groupSync      = "Sync"
	groupCtrl      = "Controller"
	groupLeader    = "Leader election"
	groupOps       = "Operations"
	groupDiag      = "Diagnostics"
	groupLogging   = "Logging (klog)"
)

// helpWidth is the column --help wraps flag descriptions at.
const helpWidth = 100

// wordSeparators lets a flag be spelt with underscores where its name has
// dashes (klog's --log_dir is --log-dir), as Kubernetes components do.
func wordSeparators(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}

// flagGroups are a command's flags in named groups, shown by --help in
// the order the groups were made.
type flagGroups struct {
	names []string
	sets  map[string]*pflag.FlagSet
}

// group returns the flag set of the group name, made on first use.
func (g *flagGroups) group(name string) *pflag.FlagSet {
	if fs, ok := g.sets[name]; ok {
		return fs
	}
	if g.sets == nil {
		g.sets = map[string]*pflag.FlagSet{}
	}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetNormalizeFunc(wordSeparators)
	fs.SortFlags = false // in the order they are defined
	g.names = append(g.names, name)
	g.sets[name] = fs
	return fs
}

// install gives cmd the groups' flags and a usage that lists them by
// group.
func (g *flagGroups) install(cmd *cobra.Command) {
	for _, name := range g.names {
		cmd.Flags().AddFlagSet(g.sets[name])
	}
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		w := c.OutOrStderr()
		fmt.Fprintf(w, "Usage:\n  %s\n", c.UseLine())
		if c.HasExample() {
			fmt.Fprintf(w, "\nExamples:\n%s\n", c.Example)
		}
		grouped := map[string]bool{}
		for _, name := range g.names {
			fs := g.sets[name]
			fs.VisitAll(func(f *pflag.Flag) { grouped[f.Name] = true })
			if usage := fs.FlagUsagesWrapped(helpWidth); usage != "" {
				fmt.Fprintf(w, "\n%s:\n%s", name, usage)
			}
		}
		// What cobra adds: --help.
		rest := pflag.NewFlagSet("other", pflag.ContinueOnError)
		rest.SortFlags = false
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !grouped[f.Name] {
				rest.AddFlag(f)
			}
		})
		if usage := rest.FlagUsagesWrapped(helpWidth); usage != "" {
			fmt.Fprintf(w, "\nOther:\n%s", usage)
		}
		return nil
	})
}

// endpointFlags defines --nb and --sb with their TLS material; the SB's
// default to the NB's after parsing (see endpointsTLS).
func endpointFlags(fs *pflag.FlagSet, nb, sb *ovn.Endpoint) {
	fs.StringVar(&nb.Address, "nb", "", "the OVN Northbound database at `ADDR`: unix:PATH, tcp:IP:PORT or ssl:IP:PORT (comma-separated for a cluster)")
	fs.StringVar(&nb.Cert, "nb-cert", "", "client certificate `FILE` for an ssl: NB")
	fs.StringVar(&nb.Key, "nb-key", "", "client private key `FILE` for an ssl: NB")
	fs.StringVar(&nb.CA, "nb-ca", "", "CA certificate `FILE` for an ssl: NB")
	fs.StringVar(&sb.Address, "sb", "", "the OVN Southbound database at `ADDR`, read for gateway chassis; without it every router with an external network must name spec.gateway")
	fs.StringVar(&sb.Cert, "sb-cert", "", "client certificate `FILE` for an ssl: SB (default: --nb-cert)")
	fs.StringVar(&sb.Key, "sb-key", "", "client private key `FILE` for an ssl: SB (default: --nb-key)")
	fs.StringVar(&sb.CA, "sb-ca", "", "CA certificate `FILE` for an ssl: SB (default: --nb-ca)")
	endpointTimeoutFlag(fs, &nb.Timeout, &sb.Timeout)
}

// endpointTimeoutFlag defines --endpoint-timeout for the endpoints whose
// timeouts are ds.
func endpointTimeoutFlag(fs *pflag.FlagSet, ds ...*time.Duration) {
	fs.Var(endpointTimeout(ds), "endpoint-timeout",
		fmt.Sprintf("how long one NB or SB endpoint may take to accept a connection and answer before the next one of the list is tried (default %s)", ovn.DefaultTimeout))
}

// endpointTimeout sets the per-endpoint timeout of the NB and the SB.
type endpointTimeout []*time.Duration

func (e endpointTimeout) String() string {
	if len(e) == 0 || *e[0] == 0 {
		return ""
	}
	return e[0].String()
}

func (e endpointTimeout) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	if d <= 0 {
		return errors.New("must be positive")
	}
	for _, p := range e {
		*p = d
	}
	return nil
}

func (endpointTimeout) Type() string { return "duration" }

// endpointsTLS gives the SB the NB's TLS material where it has none of its
// own, and checks that the files of every endpoint that uses ssl: can be
// read, naming the flag and the file when one cannot. The TLS flags of a
// tcp: or unix: endpoint are ignored: a Deployment passes them whether or
// not its Secret exists.
func endpointsTLS(nb, sb *ovn.Endpoint) error {
	sbFlag := func(own, fromNB string, v *string, nbv string) string {
		if *v == "" && nbv != "" {
			*v = nbv
			return fmt.Sprintf("%s (default: %s)", own, fromNB)
		}
		return own
	}
	sbNames := [3]string{
		sbFlag("--sb-cert", "--nb-cert", &sb.Cert, nb.Cert),
		sbFlag("--sb-key", "--nb-key", &sb.Key, nb.Key),
		sbFlag("--sb-ca", "--nb-ca", &sb.CA, nb.CA),
	}
	if err := checkTLSFiles("NB", *nb, [3]string{"--nb-cert", "--nb-key", "--nb-ca"}); err != nil {
		return err
	}
	return checkTLSFiles("SB", *sb, sbNames)
}

// checkTLSFiles checks, for an endpoint that uses ssl:, that its
// certificate, key and CA files (named by the flags in names) are given
// and readable.
func checkTLSFiles(db string, ep ovn.Endpoint, names [3]string) error {
	if !ep.UsesTLS() {
		return nil
	}
	for i, file := range []string{ep.Cert, ep.Key, ep.CA} {
		if file == "" {
			return fmt.Errorf("%s endpoint %s: ssl: needs a certificate, a key and a CA certificate, and %s is not set", db, ep.Address, names[i])
		}
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("%s %s, needed by the ssl: %s endpoint %s: %w", names[i], file, db, ep.Address, err)
		}
		f.Close()
	}
	return nil
}

// instanceFlag defines --instance.
func instanceFlag(fs *pflag.FlagSet, v *string) {
	fs.StringVar(v, "instance", translator.DefaultInstance, "managed-by value `NAME` marking the rows this kubevirt-ovn owns: two instances on one NB never touch each other's rows")
}

// fromFileFlag defines --from-file.
func fromFileFlag(fs *pflag.FlagSet, v *[]string, usage string) {
	fs.StringArrayVar(v, "from-file", nil, usage)
}

// zoneFlag defines --zone.
func zoneFlag(fs *pflag.FlagSet, v *zoneFlags, usage string) {
	fs.Var(v, "zone", usage)
}

// moveNudgeFlag defines --move-nudge (see ovn.FinishMoves).
func lbRejectEmptyFlag(fs *pflag.FlagSet, v *bool) {
	fs.BoolVar(v, "lb-reject-empty", false, "an empty load balancer (no members) rejects new connections (TCP RST, ICMP unreachable: Load_Balancer options:reject=true) instead of dropping them as ONOS did")
}

// defaultDenyFlag defines --default-deny (see translator.Snapshot.DefaultDeny).
func defaultDenyFlag(fs *pflag.FlagSet, v *bool) {
	fs.BoolVar(v, "default-deny", false, "every VM port drops IP traffic both ways except DHCP and ping to its network's gateway, unless a security group allows it, as ONOS did (one Port_Group per network with drop ACLs); false: a VM port in no security group is open")
}

func moveNudgeFlag(fs *pflag.FlagSet, v *bool) {
	fs.BoolVar(v, "move-nudge", true, "after moving gateway ports away from chassis that still run, wait until the SB binds each on its new chassis and rewrite NB_Global options:"+kvnb.BFDMultOption+
		" with the same value, so that the old gateways drop the ports' flows; only on an OVN whose ovn-controller keeps a moved port's flows on its old gateway (before 23.09.1 and 24.03.0; see translator/gateways.md); false: never")
}

// klogFlags defines klog's flags (--v, --vmodule, --log-file, ...), with
// dashes where klog has underscores (both spellings work).
func klogFlags(fs *pflag.FlagSet) {
	gfs := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(gfs)
	gfs.VisitAll(func(f *goflag.Flag) { fs.AddFlag(pflag.PFlagFromGoFlag(f)) })
}

// zoneFlags are the --zone flags: NAME=NB,SB, one per zone.
type zoneFlags []zoneEndpoints

type zoneEndpoints struct {
	name   string
	nb, sb string
}

func (z *zoneFlags) String() string {
	var out []string
	for _, f := range *z {
		out = append(out, f.name+"="+f.nb+","+f.sb)
	}
	return strings.Join(out, " ")
}

func (z *zoneFlags) Set(v string) error {
	name, eps, ok := strings.Cut(v, "=")
	nb, sb, ok2 := strings.Cut(eps, ",")
	if !ok || !ok2 || name == "" || nb == "" || sb == "" || strings.Contains(sb, ",") {
		return fmt.Errorf("%q is not NAME=NB,SB (one NB and one SB endpoint)", v)
	}
	for _, ep := range []string{nb, sb} {
		if strings.HasPrefix(ep, "ssl:") {
			return fmt.Errorf("%q: a zone's databases are reached over unix or tcp, not ssl", v)
		}
	}
	if slices.ContainsFunc(*z, func(f zoneEndpoints) bool { return f.name == name }) {
		return fmt.Errorf("zone %s is given twice", name)
	}
	*z = append(*z, zoneEndpoints{name, nb, sb})
	return nil
}

func (*zoneFlags) Type() string { return "NAME=NB,SB" }

// sorted are the zones sorted by name.
func (z zoneFlags) sorted() []zoneEndpoints {
	out := slices.Clone(z)
	slices.SortFunc(out, func(a, b zoneEndpoints) int { return strings.Compare(a.name, b.name) })
	return out
}
