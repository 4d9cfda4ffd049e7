package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// genManifest writes n routers the way deploy/examples declares them: per
// router a VirtualRouter, two NADs with a network-config annotation, and ten
// VMIs, five on each network, all in one multi-document YAML stream.
func genManifest(n int) []byte {
	var b strings.Builder
	for r := 0; r < n; r++ {
		fmt.Fprintf(&b, `# router %[1]d
apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata:
  name: router-%[1]d
spec:
  name: router-%[1]d
  mac: "fa:16:3e:%02[2]x:%02[3]x:01"
  description: edge router of tenant %[1]d
  enableSnat: true
  internal:
    - net-%[1]d-a
    - net-%[1]d-b
  external:
    ip: 172.16.%[2]d.%[3]d
    network: public
  peerRouter:
    ip: 172.16.0.1
    mac: "00:00:00:00:ee:01"
  gateway: gw1
---
`, r, r/256, r%256)
		for i, net := range []string{"a", "b"} {
			fmt.Fprintf(&b, `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: net-%[1]d-%[2]s
  namespace: tenant-%[1]d
  annotations:
    network-config: '{"type": "GENEVE", "mtu": 1450, "segmentId": "%[3]d", "cidr": "10.%[4]d.%[5]d.0/24", "gatewayIp": "10.%[4]d.%[5]d.1", "ipPool": {"start": "10.%[4]d.%[5]d.10", "end": "10.%[4]d.%[5]d.200"}, "dnses": ["8.8.8.8"]}'
spec:
  config: '{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "net-%[1]d-%[2]s"}'
---
`, r, net, 2*r+i+1, (2*r+i)/256, (2*r+i)%256)
			for v := 0; v < 5; v++ {
				fmt.Fprintf(&b, `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm-%[1]d-%[2]s-%[3]d
  namespace: tenant-%[1]d
spec:
  networks:
    - name: eth1
      multus:
        networkName: net-%[1]d-%[2]s
status:
  nodeName: hv%[3]d
  interfaces:
    - name: eth1
      mac: "50:54:00:01:%02[4]x:%02[3]x"
      ipAddress: 10.%[5]d.%[6]d.%[7]d
---
`, r, net, v, (2*r+i)%256, (2*r+i)/256, (2*r+i)%256, 10+v)
			}
		}
	}
	return []byte(b.String())
}

// BenchmarkLoad reads 1,000 routers (a VirtualRouter, two NADs and ten
// VMIs each, ~3.7 MB) from one file.
func BenchmarkLoad(b *testing.B) {
	data := genManifest(1000)
	path := filepath.Join(b.TempDir(), "routers.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("input: %d bytes", len(data))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		s, err := LoadPaths([]string{path})
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Objects.Routers) != 1000 || len(s.Objects.VMs) != 10000 {
			b.Fatalf("read %d routers, %d VM ports", len(s.Objects.Routers), len(s.Objects.VMs))
		}
	}
}

// BenchmarkLoaderOneFileChanged: 1,000 routers in 1,000 files, one file
// rewritten between Loads: the Loader decodes that file alone.
func BenchmarkLoaderOneFileChanged(b *testing.B) {
	dir := b.TempDir()
	for r := range 1000 {
		data := genManifest(1)
		data = []byte(strings.ReplaceAll(string(data), "-0", fmt.Sprintf("-%d", r)))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("router-%04d.yaml", r)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	l := NewLoader()
	if _, _, err := l.Load([]string{dir}); err != nil {
		b.Fatal(err)
	}
	changed := filepath.Join(dir, "router-0500.yaml")
	orig, err := os.ReadFile(changed)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		// A different size each time: a change stat always sees.
		if err := os.WriteFile(changed, append(orig, strings.Repeat("#", i%2+1)+"\n"...), 0o644); err != nil {
			b.Fatal(err)
		}
		_, changes, err := l.Load([]string{dir})
		if err != nil {
			b.Fatal(err)
		}
		if len(changes) > 1 {
			b.Fatalf("%d changes", len(changes))
		}
	}
}

// routerFiles are n routers' files as integration/cmd/bench writes them:
// per router a VirtualRouter, two NADs and ten VMIs (13 documents, ~3.7 kB).
func routerFiles(n int) [][]byte {
	one := string(genManifest(1))
	files := make([][]byte, n)
	for r := range files {
		files[r] = []byte(strings.ReplaceAll(one, "-0", fmt.Sprintf("-%d", r)))
	}
	return files
}

// decodePaths are the ways to read a file the benchmark compares.
var decodePaths = []struct {
	name   string
	decode func(source string, data []byte) (*Set, error)
}{
	{"fast", decodeFast},
	{"general", func(source string, data []byte) (*Set, error) {
		s := &Set{}
		return s, s.addGeneral(source, data)
	}},
	{"sigs.k8s.io-yaml-typed", func(source string, data []byte) (*Set, error) {
		s := &Set{}
		return s, s.addLibrary(source, data)
	}},
	{"yaml.v3-parse-only", parseOnlyV3},
}

// addLibrary is the well-kept library path the fast reader was measured
// against (issue 21): each document decoded by sigs.k8s.io/yaml (YAML to
// JSON, then encoding/json) straight into the typed object, its kind read
// first (two passes), no general map of the document kept. Lists are left
// out: the benchmark's files have none.
func (s *Set) addLibrary(source string, data []byte) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		where := fmt.Sprintf("%s: document %d", source, doc)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		var meta objectMeta
		if err := sigsyaml.Unmarshal(d, &meta); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		switch {
		case meta.APIVersion == KubevirtV1 && meta.Kind == KindRouter:
			var vr VirtualRouter
			if err := sigsyaml.Unmarshal(d, &vr); err != nil {
				return decodeErr(where, KindRouter, vr.Name, err)
			}
			err = s.applyRouter(where, &vr)
		case meta.APIVersion == CNCFV1 && meta.Kind == KindNAD:
			var nad NetworkAttachmentDefinition
			if err := sigsyaml.Unmarshal(d, &nad); err != nil {
				return decodeErr(where, KindNAD, nad.Name, err)
			}
			err = s.applyNAD(where, &nad)
		case meta.APIVersion == KubevirtV1 && meta.Kind == KindVMI:
			var vmi VirtualMachineInstance
			if err := sigsyaml.Unmarshal(d, &vmi); err != nil {
				return decodeErr(where, KindVMI, vmi.Name, err)
			}
			s.applyVMI(where, &vmi)
		case meta.Kind != "":
			s.ignored(where, &meta.TypeMeta, &meta.ObjectMeta)
		}
		if err != nil {
			return err
		}
	}
}

// parseOnlyV3 only parses each document with go.yaml.in/yaml/v3 into its
// node tree, decoding nothing: less than any yaml.v3 path into the typed
// objects would cost.
func parseOnlyV3(_ string, data []byte) (*Set, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	for {
		var n yamlv3.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
	}
}

// BenchmarkDecodePaths compares the fast reader with the general path and
// with the library paths that could replace it, on one router's file and on
// 1,000 routers' files (decoded from memory: reading the files costs every
// path the same). ns/file is the time per file, x_fast how many times the
// fast reader's time per file a path takes. `make bench` runs it.
func BenchmarkDecodePaths(b *testing.B) {
	files := routerFiles(1000)
	want, err := decodeFast("router.yaml", files[0])
	if err != nil {
		b.Fatalf("the fast reader leaves the benchmark's file to the general path: %v", err)
	}
	for _, p := range decodePaths[1:3] {
		got, err := p.decode("router.yaml", files[0])
		if err != nil || !reflect.DeepEqual(want, got) {
			b.Fatalf("%s reads the benchmark's file differently (%v)", p.name, err)
		}
	}
	fast := map[string]float64{} // ns per file, by input
	for _, p := range decodePaths {
		for _, in := range []struct {
			name  string
			files [][]byte
		}{{"file", files[:1]}, {"dir-1000", files}} {
			b.Run(p.name+"/"+in.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					for _, f := range in.files {
						if _, err := p.decode("router.yaml", f); err != nil {
							b.Fatal(err)
						}
					}
				}
				perFile := float64(b.Elapsed().Nanoseconds()) / float64(b.N*len(in.files))
				if p.name == "fast" {
					fast[in.name] = perFile
				}
				b.ReportMetric(perFile, "ns/file")
				if fast[in.name] > 0 {
					b.ReportMetric(perFile/fast[in.name], "x_fast")
				}
			})
		}
	}
}
