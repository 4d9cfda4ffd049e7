package manifest

import (
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fast reader must read exactly what the general path reads, or leave
// the file to it: for any input it reads, the general path must succeed
// with the same objects and notes.
func requireSameAsGeneral(t *testing.T, name string, data []byte) (fast bool) {
	t.Helper()
	general := &Set{}
	gerr := general.addGeneral("in.yaml", data)
	got, err := decodeFast("in.yaml", data)
	if err != nil {
		return false
	}
	require.NoError(t, gerr, "%s: the fast reader read what the general path rejects:\n%s", name, data)
	require.Equal(t, general, got, "%s: the fast reader reads differently:\n%s", name, data)
	return true
}

func TestDecodeFast_CommonFormatsAreFast(t *testing.T) {
	examples, err := filepath.Glob("../../deploy/examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, examples)
	inputs := map[string]string{
		"router":        routerYAML,
		"nads":          nadAYAML + "---\n" + nadPublicYAML,
		"vmi":           vmiYAML,
		"generated":     string(genManifest(3)),
		"stream":        "# objects\n---\n" + routerYAML + "---\n" + nadAYAML + "---\n# an empty document\n---\n" + vmiYAML + "---\n",
		"list":          "apiVersion: v1\nkind: List\nitems:\n" + yamlListItem(routerYAML) + yamlListItem(nadAYAML) + yamlListItem(vmiYAML),
		"ignored kinds": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n      - name: c\n        image: x:1\n        args: [\"--a\", b]\n",
	}
	inputs["multus config block"] = strings.Replace(nadAYAML, "spec:\n  config: '{\"cniVersion\": \"0.3.1\", \"type\": \"kubevirt-ovn\", \"name\": \"net-a\"}'\n",
		"spec:\n  config: |\n    {\n      \"cniVersion\": \"0.3.1\",\n      \"type\": \"kubevirt-ovn\"\n    }\n", 1)
	require.Contains(t, inputs["multus config block"], "config: |")
	inputs["block in a list"] = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: kubevirt.io/v1\n  kind: VirtualRouter\n  metadata: {name: r}\n  spec:\n    description: |\n      in a list\n    gateway: g\n"
	for _, p := range examples {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		if generalOnly(string(b)) {
			// Kinds the fast reader leaves to the general path by
			// design (few, small objects): read there, and the same.
			requireSameAsGeneral(t, filepath.Base(p), b)
			require.NoError(t, (&Set{}).addGeneral(p, b), p)
			continue
		}
		inputs[filepath.Base(p)] = string(b)
	}
	for name, in := range inputs {
		assert.True(t, requireSameAsGeneral(t, name, []byte(in)), "%s is read by the general path", name)
	}
}

// generalOnly says whether a manifest holds a kind the fast reader leaves
// to the general path.
func generalOnly(text string) bool {
	for _, kind := range []string{KindSecurityGroup, KindSecurityGroupRule, KindLoadBalancer} {
		if strings.Contains(text, "\nkind: "+kind+"\n") {
			return true
		}
	}
	return false
}

// Inputs at the edges of the subset: each is either read fast and the same,
// or left to the general path.
var edgeInputs = []string{
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  description: edge, of {net-a} [b] a#b\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  enableSnat: yes\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  enableSnat: On\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  enableSnat: \"true\"\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  enableSnat: n\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: 123}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec: {gateway: 1.5, mac: 0x1f}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec: {gateway: 1.2.3}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  mac: fa:16:3e:00:00:01\n  gateway: 2024-01-02\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  internal: []\n  external: {}\n  peerRouter: ~\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  internal:\n  - a\n  - 'b'\n  - \"c\"\n  -\n  external: null\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  name: a\n  name: b\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nSpec:\n  name: a\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {NAME: r}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r, generation: 3}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r, uid: abc, labels: {a: b, c: \"1\"}}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r, labels: {a: 1}}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r, labels: {a: }}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata:\n  name: r\n  creationTimestamp: \"2024-03-04T05:06:07Z\"\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata:\n  name: r\n  creationTimestamp: 2024-03-04T05:06:07Z\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata:\n  name: r\n  creationTimestamp: \"yesterday\"\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata:\n  name: r\n  creationTimestamp: null\n",
	"apiVersion: v1\nkind: List\nitems: null\n",
	"apiVersion: v1\nkind: List\nitems: []\n",
	"apiVersion: v1\nkind: List\nitems:\n- null\n",
	"apiVersion: v1\nkind: List\nitems: 5\n",
	"apiVersion: v1\nkind: FooList\nitems:\n- {apiVersion: v1, kind: Foo, metadata: {name: f}}\n",
	"apiVersion: v1\nkind: FooList\n",
	"apiVersion: v1\nkind: Foo\nitems:\n- 1\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: &m {name: r}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: !!map {name: r}\n",
	"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: nad\n  annotations:\n    network-config: |\n      {\"type\": \"FLAT\"}\n",
	"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: nad\n  annotations:\n    network-config: '{\"type\": \"FLAT\", \"mtu\": \"x\"}'\n",
	"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: nad\n  annotations:\n    network-config: \"{\\\"type\\\": \\\"FLAT\\\"}\"\n",
	"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: nad\n  annotations:\n    network-config: \"{\\\"type\\\": \\n \\\"FLAT\\\"}\"\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  description: it''s 'quoted'\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  description: 'it''s'\n  mac: \"a\\\"b\\\\c\"\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  description: \"a\" # c\n  mac: \"a\"# c\n",
	"--- # first\napiVersion: v1\nkind: A\n--- # second\napiVersion: v1\nkind: B\n...\n",
	"---\n---\napiVersion: v1\nkind: A\n---x\n",
	"----\napiVersion: v1\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  description: a long\n    description\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  description:value\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata:\n  name: r\n spec: {}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata:\n    name: r\n  namespace: x\n",
	": x\n",
	"- - a\n",
	"- a\n- b\n",
	"just a scalar\n",
	"  apiVersion: v1\n  kind: Indented\n",
	"apiVersion: v1\nkind: A\nspec: {a: [b, {c: d}], e: []}\n",
	"apiVersion: v1\nkind: A\nspec: {a: [b, {c: d}], e: [}\n",
	"apiVersion: v1\nkind: A\nspec: {a: b,}\n",
	"apiVersion: v1\nkind: A\nspec: {a}\n",
	"apiVersion: v1\nkind: A\nspec: {\"a\":b}\n",
	"apiVersion: v1\nkind: A\nspec:\n  y: 1\n",
	"apiVersion: v1\nkind: A\nspec:\n  on: 1\n",
	"apiVersion: v1\nkind: A\nspec:\n  replicas: .inf\n",
	"apiVersion: v1\nkind: A\nspec:\n  replicas: -.inf\n",
	"apiVersion: v1\nkind: A\nspec:\n  replicas: 1e400\n",
	"apiVersion: v1\nkind: A\nspec:\n  a: b: c\n",
	"apiVersion: v1\nkind: A\nspec:\n  a: 'x\n",
	"apiVersion: v1\nkind: A\n? complex\n: v\n",
	"%YAML 1.1\n---\napiVersion: v1\nkind: A\n",
	"apiVersion: v1\nkind: A\nbase: &b {x: 1}\nspec:\n  <<: *b\n",
	"apiVersion: v1\nkind: A\nspec:\n  x: 1\n  x: [2]\n",
	"apiVersion: v1\nkind: A\nspec: \n  \n  x: 1   \n\n",
	"apiVersion: v1\r\nkind: A\r\n",
	"apiVersion: v1\nkind: A\nmetadata: {name: \"caf\u00e9\"}\n",
	"apiVersion: v1\nkind:\tA\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: v}\nspec:\n  networks:\n  - name: eth1\n    multus: {networkName: ns/net}\n  - name: default\n    pod: {}\n  -\nstatus:\n  interfaces:\n  - {name: eth1, mac: \"m\", ipAddresses: [10.0.0.1, 10.0.0.2]}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: v}\nspec:\n  networks: []\nstatus:\n  interfaces: ~\n  nodeName: 5\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: v\n  annotations:\n    interfaces: '[{\"network\": \"net\", \"ipAddress\": \"10.0.0.5\"}]'\nspec:\n  domain:\n    cpu: {cores: 1}\n    devices:\n      disks: [{name: d}]\n      interfaces:\n      - {name: eth1, bridge: {}, macAddress: \"50:54:00:00:00:05\"}\n      - name: default\n        masquerade: {}\n  networks:\n  - name: eth1\n    multus: {networkName: net}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: v}\nspec:\n  domain: ~\n  networks:\n  - name: eth1\n    multus: {networkName: net}\nstatus:\n  interfaces:\n  - {name: eth1, mac: \"m\", ipAddress: 10.0.0.1}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: v}\nspec:\n  domain:\n    devices:\n      interfaces: [{name: eth1, MacAddress: x}]\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: v}\nspec:\n  networks:\n  - name: eth1\n    multus: null\n  - name: eth2\n    multus: {}\n  - name: eth3\n    Multus: {networkName: x}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: a}\nspec: {name: b}\n---\napiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: a}\nspec: {name: c}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nspec: {mac: x}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\n\"metadata\": {'name': \"r\"}\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  internal:\n    - a # one\n    # between\n    - b\n",
	"{\"apiVersion\": \"v1\", \"kind\": \"A\"}\n",
	"apiVersion: v1\nkind: A\n...\n",
	"apiVersion: v1\nkind: A\nspec: [a, b] x\n",
	"apiVersion: v1\nkind: A\nspec: - a\n",
	"apiVersion: v1\nkind: A\nspec: @a\n",
	"apiVersion: v1\nkind: A\nspec: `a\n",
	"apiVersion: v1\nkind: A\nspec: {a: b} # c\n",
	"apiVersion: v1\nkind: A\nspec: {a: b}# c\n",
	"apiVersion: v1\nkind: A\nspec:\n  - a\n  b: c\n",
	"apiVersion: v1\nkind: A\nspec:\n  b: c\n  - a\n",
	"apiVersion: v1\nkind: A\nspec:\n- a\nother: b\n",
	"apiVersion: v1\nkind: A\nspec:\n- a\n- b: c\n  d: e\n-   f: g\n    h: i\n",
	"apiVersion: v1\nkind: A\nspec:\n- a\n - b\n",
	"apiVersion: v1\nkind: A\n1: x\n",
	"apiVersion: v1\nkind: A\n\"1\": x\n",
	"apiVersion: v1\nkind: A\nnull: x\n",
	"apiVersion: v1\nkind: A\n~: x\n",
	"apiVersion: v1\nkind: A\na b: x\n",
	"apiVersion: v1\nkind: A\na:b: x\n",
	"apiVersion: v1\nkind: A\na: b:c\n",
	"apiVersion: v1\nkind: A\na: 'b' 'c'\n",
	"apiVersion: v1\nkind: A\na: \"\"\nb: ''\n",
	"apiVersion: v1\nkind: A\na: \"\\t\"\n",
	"apiVersion: v1\nkind: A\na: +1\nb: 0o17\nc: 0b101\nd: 1_000\ne: 0x_1F\n",
	"apiVersion: v1\nkind: A\n" + strings.Repeat("a", 1100) + ": x\n",
	"apiVersion: v1\nkind: A\na: !!str 1\n",
	"apiVersion: v1\nkind: A\na: *x\n",
	"apiVersion: v1\nkind: A\na: >\n  folded\n",
	"apiVersion: v1\n kind: A\n",
	"apiVersion: v1\nkind: A\n# end\n",
	"#only a comment\n",
	"apiVersion: v1\nkind: List\nitems:\n- apiVersion: kubevirt.io/v1\n  kind: VirtualRouter\n  metadata: {name: r}\n  spec:\n    description: |\n      in a list\n    gateway: g\n- apiVersion: kubevirt.io/v1\n  kind: VirtualRouter\n  spec:\n    name: |-\n      r2\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  description: |\n    line one  \n\n      indented # not a comment\n   \n    last\n\n\n  gateway: |-\n    g\n  mac: |\n   m\n# c\n",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  description: |-\n    a\n        \n    b",
	"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: r}\nspec:\n  internal:\n  - |\n    x\n",
	"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: nad\n  annotations:\n    network-config: |\n      {\"type\": \"FLAT\",\n\n        \"mtu\": 1500}  \n    # after\n    other: |-\n     a\n       b # c\n      \n     d\n\n\nspec:\n  config: |\n    {\n      \"cniVersion\": \"0.3.1\"\n    }\n",
	"apiVersion: v1\nkind: A\nmetadata:\n  annotations:\n    a: |\n\n      leading empty\n    b: |+\n      keep\n\n    c: |2\n        explicit\n    d: |\n    e: x\n",
	"apiVersion: v1\nkind: A\nmetadata:\n  annotations:\n    a: |\n      x\n   y: z\n",
	"apiVersion: v1\nkind: A\nmetadata:\n  annotations:\n    a: |\n      x\n     \n      y\n...\n",
	"apiVersion: v1\nkind: A\nmetadata:\n  annotations:\n    a: | # c\n      x\n    b: |- # c\n      y",
	"",
	"\n\n",
	"---\n",
	"null\n",
	"~\n",
}

func TestDecodeFast_SameAsGeneral(t *testing.T) {
	fast := 0
	for i, in := range edgeInputs {
		if requireSameAsGeneral(t, "edge input "+strconv.Itoa(i), []byte(in)) {
			fast++
		}
	}
	t.Logf("%d of %d edge inputs read fast", fast, len(edgeInputs))
	for _, dir := range []string{"testdata/fuzz/FuzzDecode", "testdata/fuzz/FuzzDecodeAndPlan"} {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			data := corpusBytes(t, string(b))
			requireSameAsGeneral(t, e.Name(), data)
		}
	}
}

// corpusBytes reads the []byte value of a "go test fuzz v1" file.
func corpusBytes(t *testing.T, file string) []byte {
	t.Helper()
	_, v, ok := strings.Cut(file, "\n")
	require.True(t, ok)
	v = strings.TrimSpace(v)
	require.True(t, strings.HasPrefix(v, "[]byte(") && strings.HasSuffix(v, ")"), v)
	s, err := strconv.Unquote(v[len("[]byte(") : len(v)-1])
	require.NoError(t, err)
	return []byte(s)
}

// FuzzFastMatchesGeneral: whatever the bytes, what the fast reader reads
// the general path reads the same.
func FuzzFastMatchesGeneral(f *testing.F) {
	for _, in := range edgeInputs {
		f.Add([]byte(in))
	}
	f.Add([]byte(routerYAML + "---\n" + nadAYAML + "---\n" + vmiYAML))
	f.Fuzz(func(t *testing.T, data []byte) {
		requireSameAsGeneral(t, "fuzz", data)
	})
}

var diffRounds = flag.Int("diff-rounds", 3000, "random documents TestDecodeFast_RandomDocuments compares")

// TestDecodeFast_RandomDocuments compares the two paths on documents made
// of random lines from the shapes manifests use, with random indentation:
// structure is where byte-level fuzzing is weakest.
func TestDecodeFast_RandomDocuments(t *testing.T) {
	keys := []string{"name", "mac", "description", "enableSnat", "internal", "external", "peerRouter", "gateway",
		"ip", "network", "metadata", "spec", "status", "networks", "multus", "networkName", "interfaces",
		"ipAddress", "ipAddresses", "nodeName", "annotations", "labels", "namespace", "items", "creationTimestamp",
		"network-config", "domain", "devices", "macAddress", "id", "routerName", "floatingIp", "fixedIp", "vmName", "Name", "y", "1", `"name"`, "'mac'", "a b", "apiVersion", "kind", "pod"}
	values := []string{"", "r1", "yes", "no", "True", "~", "null", "1", "1.5", "10.0.0.1", "fa:16:3e:00:00:01",
		"'quoted'", `"dq"`, `"a\"b"`, "'it''s'", "[a, b]", "[]", "{}", "{name: x}", "{networkName: net}", "{ip: 1.2.3.4, network: n}",
		"|", "|-", ">", "&a x", "*a", "!!str x", "a # c", "a#b", "kubevirt.io/v1", "VirtualRouter",
		"VirtualMachineInstance", "NetworkAttachmentDefinition", "k8s.cni.cncf.io/v1", "List",
		`'{"type": "FLAT", "mtu": 1500}'`, "2024-01-01", `"2024-03-04T05:06:07Z"`, "-1", ".inf", "a: b", "'open", "[a,", "x]"}
	kinds := []string{"apiVersion: kubevirt.io/v1\nkind: VirtualRouter\n", "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\n",
		"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\n", "apiVersion: kubevirt.io/v1\nkind: FloatingIp\n",
		"apiVersion: kubevirt.io/v1\nkind: FloatingIP\n", "apiVersion: v1\nkind: List\n", ""}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	// A value: mostly plain, sometimes whatever values holds.
	value := func() string {
		if rng.IntN(4) == 0 {
			return pick(values)
		}
		return pick([]string{"r1", "net-a", "10.0.0.1", "true", "false", `"50:54:00:00:00:05"`, "tenant/net-b", "edge router, of {a}",
			`"\""`, `"\\"`, `"a\"b\\"`, `''''`, `'''a'''`, `''`, `""`, `{ip: '''', mac: "\""}`})
	}
	// off returns the indentation, now and then one space off.
	off := func(indent int) int {
		if rng.IntN(40) == 0 {
			return max(0, indent+rng.IntN(3)-1)
		}
		return indent
	}
	var gen func(b *strings.Builder, indent, depth int, inSeq bool)
	gen = func(b *strings.Builder, indent, depth int, inSeq bool) {
		for i := range 1 + rng.IntN(4) {
			pad := strings.Repeat(" ", off(indent))
			if inSeq && i == 0 {
				pad = "" // the entry's "- " is written
			}
			key := pick(keys)
			switch r := rng.IntN(10); {
			case depth < 4 && r < 3:
				b.WriteString(pad + key + ":\n")
				gen(b, indent+2, depth+1, false)
			case depth < 4 && r < 5:
				b.WriteString(pad + key + ":\n")
				seqIndent := indent + 2*rng.IntN(2)
				for range 1 + rng.IntN(3) {
					b.WriteString(strings.Repeat(" ", off(seqIndent)) + "- ")
					if rng.IntN(2) == 0 {
						b.WriteString(value() + "\n")
					} else {
						gen(b, seqIndent+2, depth+1, true)
					}
				}
			case r < 6:
				b.WriteString(pad + key + ": |" + pick([]string{"", "-", "+", "2"}) + "\n")
				for range 1 + rng.IntN(3) {
					b.WriteString(strings.Repeat(" ", off(indent+2+rng.IntN(2))) + pick([]string{"text", "{\"type\": \"FLAT\"}", "# not a comment", ""}) + "\n")
				}
			case r < 7:
				b.WriteString(pad + "# comment\n" + pad + key + ": " + pick(values) + "\n")
			default:
				b.WriteString(pad + key + ": " + value() + "\n")
			}
		}
	}
	fast := 0
	for round := range *diffRounds {
		var b strings.Builder
		b.WriteString(pick(kinds))
		b.WriteString("metadata:\n  name: " + value() + "\n")
		gen(&b, 0, 0, false)
		if rng.IntN(3) == 0 {
			b.WriteString("---\n")
			gen(&b, 0, 0, false)
		}
		if requireSameAsGeneral(t, "random document "+strconv.Itoa(round), []byte(b.String())) {
			fast++
		}
	}
	t.Logf("%d of %d random documents read fast", fast, *diffRounds)
}

// Quoted scalars whose escapes come first, last or alone.
const escapesYAML = `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: r}
spec:
  description: "\""
  gateway: "\\"
  mac: "\"a\\"
  peerRouter: {ip: ''''}
---
apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: "a'"}
spec: {name: 'a'''}
`

func TestDecodeFast_Escapes(t *testing.T) {
	require.True(t, requireSameAsGeneral(t, "escapes", []byte(escapesYAML)), "read fast")
	s, err := decodeFast("in.yaml", []byte(escapesYAML))
	require.NoError(t, err)
	assert.Equal(t, `"`, s.Objects.Routers[0].Description)
	assert.Equal(t, `\`, s.Objects.Routers[0].Gateway)
	assert.Equal(t, `"a\`, s.Objects.Routers[0].MAC)
	assert.Equal(t, "'", s.Objects.Routers[0].PeerRouter.IP)
	assert.Equal(t, "a'", s.Objects.Routers[1].Name)
	assert.Empty(t, s.Objects.Invalid)
}
