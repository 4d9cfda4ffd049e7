package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		if len(s.Snapshot.Routers) != 1000 || len(s.Snapshot.VMs) != 10000 {
			b.Fatalf("read %d routers, %d VM ports", len(s.Snapshot.Routers), len(s.Snapshot.VMs))
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
