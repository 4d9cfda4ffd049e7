package manifest

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// The fuzz targets run their committed seed corpus (testdata/fuzz/) in every
// `go test`; `go test -fuzz=FuzzDecodeAndPlan ./translator/manifest` explores
// further. Whatever the bytes, decoding and planning must not panic, the
// plan must be deterministic, every error must name its object, and every row
// must carry our name prefix and owner keys.

func FuzzDecode(f *testing.F) {
	f.Add([]byte(routerYAML))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Set
		if err := s.Add("fuzz.yaml", data); err != nil && !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
			t.Fatalf("decode error does not say where: %v", err)
		}
	})
}

func FuzzDecodeAndPlan(f *testing.F) {
	f.Add([]byte(routerYAML))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Set
		if err := s.Add("fuzz.yaml", data); err != nil {
			return
		}
		snap := *s.Objects.Snapshot()
		snap.ChassisKnown = len(snap.Routers)%2 == 0
		snap.Chassis = []translator.Chassis{{Name: "gw1", Hostname: "gw1", Gateway: true, Physnets: []string{"physnet1"}}, {Name: "hv1", Hostname: "hv1"}}
		p := translator.Build(&snap, "fuzz")
		if again := translator.Build(&snap, "fuzz"); !reflect.DeepEqual(p, again) {
			t.Fatal("Build is not deterministic")
		}
		for _, err := range p.Errors {
			var ie *translator.InputError
			if !errors.As(err, &ie) || ie.Kind == "" || ie.Object == "" {
				t.Fatalf("error does not name its object: %v", err)
			}
		}
		owned := func(what, name string, ids map[string]string) {
			if !strings.HasPrefix(name, translator.NamePrefix) {
				t.Fatalf("%s %q lacks the %s prefix", what, name, translator.NamePrefix)
			}
			if _, ok := translator.OwnerOf(ids, "fuzz"); !ok {
				t.Fatalf("%s %q lacks owner keys: %v", what, name, ids)
			}
		}
		for _, n := range p.Networks {
			owned("switch", n.Switch.Name, n.Switch.ExternalIDs)
			for _, lsp := range n.Ports {
				owned("switch port", lsp.Name, lsp.ExternalIDs)
			}
		}
		for _, r := range p.Routers {
			owned("router", r.Router.Name, r.Router.ExternalIDs)
			for _, lrp := range r.Ports {
				owned("router port", lrp.Name, lrp.ExternalIDs)
			}
			for _, sp := range r.SwitchPorts {
				owned("switch port", sp.Port.Name, sp.Port.ExternalIDs)
			}
			for _, gc := range r.GatewayChassis {
				owned("gateway chassis", gc.Name, gc.ExternalIDs)
			}
		}
	})
}
