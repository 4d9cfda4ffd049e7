package manifest

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// decodeFast reads a file's documents with the fast reader into a new set,
// the objects and notes the general path would give, or returns
// errUnsupported (see yamlfast.go). Strings in the objects are slices of
// one copy of data.
func decodeFast(source string, data []byte) (*Set, error) {
	return (&fastDecoder{}).decode(source, data)
}

func (f *fastDecoder) decode(source string, data []byte) (*Set, error) {
	if !plainASCII(data) || looksJSON(data) {
		return nil, errUnsupported
	}
	text := string(data)
	f.set = &Set{}
	doc := 0
	for pos, start := 0, -1; ; {
		// Documents end at a line starting with "---" (which may be
		// followed by a comment), as utilyaml.YAMLReader splits them; a
		// separator that opens a document stays in it.
		end, next := len(text), len(text)
		for pos < len(text) {
			lineEnd := len(text)
			if j := strings.IndexByte(text[pos:], '\n'); j >= 0 {
				lineEnd = pos + j + 1
			}
			if strings.HasPrefix(text[pos:lineEnd], "---") {
				rest := strings.TrimSpace(text[pos+3 : lineEnd])
				if rest != "" && rest[0] != '#' {
					return nil, errUnsupported
				}
				if start >= 0 {
					end, next = pos, lineEnd
					break
				}
			}
			if start < 0 {
				start = pos
			}
			pos = lineEnd
		}
		if start < 0 {
			return f.set, nil
		}
		doc++
		root, err := f.p.parse(text[start:end])
		if err != nil {
			return nil, err
		}
		if f.p.nodes[root].kind != yNull {
			if err := f.object(fmt.Sprintf("%s: document %d", source, doc), root); err != nil {
				return nil, errUnsupported
			}
		}
		pos, start = next, -1
	}
}

// looksJSON is how utilyaml.NewYAMLOrJSONDecoder tells a JSON stream: its
// first 4096 bytes start with '{' after white space.
func looksJSON(data []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeftFunc(data[:min(len(data), 4096)], unicode.IsSpace), []byte("{"))
}

// fastDecoder decodes one file's documents with the fast reader.
type fastDecoder struct {
	p   yparser
	set *Set
	// The objects being decoded, reused from one document to the next (the
	// tables' functions would make each escape): the conversions copy what
	// they keep.
	head   header
	router VirtualRouter
	nad    NetworkAttachmentDefinition
	vmi    VirtualMachineInstance
	fip    FloatingIP
	// onObject, when set (by tests), sees each object of a kind
	// kubevirt-ovn reads, decoded, before it is converted; the object is
	// reused after the call.
	onObject func(obj any)
}

// The fast reader decodes each Go struct type with a fieldTable: one entry
// per JSON field name, saying where its value goes. A key matches an entry
// exactly, as encoding/json first matches keys; a key that matches a field of
// the type only case-insensitively (encoding/json's fallback) or that is
// named twice is the general path's. Keys the type does not have are
// ignored, as encoding/json ignores them. When a decoded type gains a
// field, TestFastPath_TablesCoverDecodedTypes fails until its table has an
// entry for it.

// fieldHow says what the fast reader does with a field.
type fieldHow uint8

const (
	fieldDecoded   fieldHow = iota // its entry decodes it
	fieldInHeader                  // headerFields decodes it, for every kind
	fieldToGeneral                 // a document that sets it is read by the general path
)

// field is the fieldTable entry of one field of T.
type field[T any] struct {
	how    fieldHow
	decode func(f *fastDecoder, v int32, into *T) error
}

// fieldTable decodes a mapping into a T.
type fieldTable[T any] struct {
	names   []string // the entries' JSON names
	entries []field[T]
	all     []string // every JSON name of T, to tell case-insensitive matches
}

// fastTables holds what each table does with each field, by the Go type it
// decodes: TestFastPath_TablesCoverDecodedTypes compares it with the types.
var fastTables = map[reflect.Type]map[string]fieldHow{}

func newTable[T any](fields map[string]field[T]) *fieldTable[T] {
	t := &fieldTable[T]{names: slices.Sorted(maps.Keys(fields))}
	if len(t.names) > 64 {
		panic("a fieldTable tells duplicate keys apart with 64 bits")
	}
	hows := make(map[string]fieldHow, len(fields))
	for _, name := range t.names {
		t.entries = append(t.entries, fields[name])
		hows[name] = fields[name].how
	}
	typ := reflect.TypeFor[T]()
	for _, jf := range jsonFields(typ) {
		t.all = append(t.all, jf.name)
	}
	fastTables[typ] = hows
	return t
}

// decode decodes mapping n into into; a null leaves it as it is.
func (t *fieldTable[T]) decode(f *fastDecoder, n int32, into *T) error {
	nd := f.p.nodes[n]
	switch nd.kind {
	case yNull:
		return nil
	case yMap:
	default:
		return errUnsupported
	}
	var seen uint64
	for k := nd.first; k >= 0; {
		v := f.p.nodes[k].next
		key := f.p.nodes[k].value
		switch i := slices.Index(t.names, key); {
		case i >= 0:
			if seen&(1<<i) != 0 {
				return errUnsupported
			}
			seen |= 1 << i
			if e := &t.entries[i]; e.how != fieldInHeader {
				if err := e.decode(f, v, into); err != nil {
					return err
				}
			}
		case foldsTo(t.all, key):
			return errUnsupported
		}
		k = f.p.nodes[v].next
	}
	return nil
}

func foldsTo(names []string, s string) bool {
	for _, n := range names {
		if strings.EqualFold(n, s) {
			return true
		}
	}
	return false
}

// jsonField is a field of a struct type as encoding/json decodes it.
type jsonField struct {
	name  string
	index []int // for reflect.Value.FieldByIndex
	typ   reflect.Type
}

// jsonFields lists the fields encoding/json decodes into struct type t by
// their JSON names, the fields of embedded structs without a name included.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct:
			for _, jf := range jsonFields(sf.Type) {
				jf.index = append([]int{i}, jf.index...)
				out = append(out, jf)
			}
		case !sf.IsExported():
		case name == "":
			out = append(out, jsonField{sf.Name, []int{i}, sf.Type})
		default:
			out = append(out, jsonField{name, []int{i}, sf.Type})
		}
	}
	return out
}

// Entries, by how a field's value is decoded; at returns where it goes.

// str: a string, or a type whose underlying type is string.
func str[T any, S ~string](at func(*T) *S) field[T] {
	return field[T]{decode: func(f *fastDecoder, v int32, into *T) error {
		p := at(into)
		s := string(*p)
		err := f.str(v, &s)
		*p = S(s)
		return err
	}}
}

func boolean[T any](at func(*T) *bool) field[T] {
	return field[T]{decode: func(f *fastDecoder, v int32, into *T) error { return f.boolean(v, at(into)) }}
}

func strs[T any](at func(*T) *[]string) field[T] {
	return field[T]{decode: func(f *fastDecoder, v int32, into *T) error { return f.strings(v, at(into)) }}
}

func stringMap[T any](at func(*T) *map[string]string) field[T] {
	return field[T]{decode: func(f *fastDecoder, v int32, into *T) error { return f.stringMap(v, at(into)) }}
}

// nested: a struct decoded by table; a null leaves it as it is.
func nested[T, E any](at func(*T) *E, table *fieldTable[E]) field[T] {
	return field[T]{decode: func(f *fastDecoder, v int32, into *T) error { return table.decode(f, v, at(into)) }}
}

// pointer: a pointer to a struct decoded by table; a null makes it nil.
func pointer[T, E any](at func(*T) **E, table *fieldTable[E]) field[T] {
	return field[T]{decode: func(f *fastDecoder, v int32, into *T) error {
		p := at(into)
		if f.isNull(v) {
			*p = nil
			return nil
		}
		*p = new(E)
		return table.decode(f, v, *p)
	}}
}

// list: a slice of structs each decoded by table; a null makes it nil. A
// null entry is left to the general path.
func list[T, E any](at func(*T) *[]E, table *fieldTable[E]) field[T] {
	return field[T]{decode: func(f *fastDecoder, v int32, into *T) error {
		p := at(into)
		switch f.p.nodes[v].kind {
		case yNull:
			*p = nil
			return nil
		case ySeq:
		default:
			return errUnsupported
		}
		out := make([]E, f.count(v))
		for e, i := f.p.nodes[v].first, 0; e >= 0; e, i = f.p.nodes[e].next, i+1 {
			if f.isNull(e) {
				return errUnsupported
			}
			if err := table.decode(f, e, &out[i]); err != nil {
				return err
			}
		}
		*p = out
		return nil
	}}
}

func inHeader[T any]() field[T] { return field[T]{how: fieldInHeader} }

func toGeneral[T any]() field[T] {
	return field[T]{how: fieldToGeneral, decode: func(*fastDecoder, int32, *T) error { return errUnsupported }}
}

// header is what the fast reader reads of every object first, as addObject
// decodes objectMeta first: its type and metadata, and its items node (-1
// when it has none).
type header struct {
	objectMeta
	items int32
}

var headerFields = newTable(map[string]field[header]{
	"apiVersion": str(func(h *header) *string { return &h.APIVersion }),
	"kind":       str(func(h *header) *string { return &h.Kind }),
	"metadata":   nested(func(h *header) *metav1.ObjectMeta { return &h.ObjectMeta }, metaFields),
	"items": {decode: func(f *fastDecoder, v int32, h *header) error {
		if k := f.p.nodes[v].kind; k != yNull && k != ySeq {
			return errUnsupported
		}
		h.items = v
		return nil
	}},
})

var metaFields = newTable(map[string]field[metav1.ObjectMeta]{
	"name":              str(func(m *metav1.ObjectMeta) *string { return &m.Name }),
	"namespace":         str(func(m *metav1.ObjectMeta) *string { return &m.Namespace }),
	"generateName":      str(func(m *metav1.ObjectMeta) *string { return &m.GenerateName }),
	"uid":               str(func(m *metav1.ObjectMeta) *types.UID { return &m.UID }),
	"resourceVersion":   str(func(m *metav1.ObjectMeta) *string { return &m.ResourceVersion }),
	"labels":            stringMap(func(m *metav1.ObjectMeta) *map[string]string { return &m.Labels }),
	"annotations":       stringMap(func(m *metav1.ObjectMeta) *map[string]string { return &m.Annotations }),
	"creationTimestamp": {decode: creationTimestamp},
	// No conversion reads these, and manifests written by hand do not set
	// them: the general path reads a document that does.
	"generation":                 toGeneral[metav1.ObjectMeta](),
	"selfLink":                   toGeneral[metav1.ObjectMeta](),
	"deletionTimestamp":          toGeneral[metav1.ObjectMeta](),
	"deletionGracePeriodSeconds": toGeneral[metav1.ObjectMeta](),
	"ownerReferences":            toGeneral[metav1.ObjectMeta](),
	"finalizers":                 toGeneral[metav1.ObjectMeta](),
	"managedFields":              toGeneral[metav1.ObjectMeta](),
})

// creationTimestamp reads an RFC 3339 time in quotes, as metav1.Time does;
// unquoted, YAML reads it as a timestamp, which the general path converts.
func creationTimestamp(f *fastDecoder, v int32, m *metav1.ObjectMeta) error {
	nd := &f.p.nodes[v]
	if nd.kind == yNull {
		m.CreationTimestamp = metav1.Time{}
		return nil
	}
	if nd.kind != yScalar || !nd.quoted {
		return errUnsupported
	}
	t, err := time.Parse(time.RFC3339, nd.value)
	if err != nil {
		return errUnsupported
	}
	m.CreationTimestamp = metav1.NewTime(t.Local())
	return nil
}

// kindTable is the table of a kind's object: fields adds to the header's
// apiVersion, kind and metadata.
func kindTable[T any](fields map[string]field[T]) *fieldTable[T] {
	for _, name := range []string{"apiVersion", "kind", "metadata"} {
		fields[name] = inHeader[T]()
	}
	return newTable(fields)
}

var routerFields = kindTable(map[string]field[VirtualRouter]{
	"spec": nested(func(r *VirtualRouter) *VirtualRouterSpec { return &r.Spec }, routerSpecFields),
})

var routerSpecFields = newTable(map[string]field[VirtualRouterSpec]{
	"name":           str(func(s *VirtualRouterSpec) *string { return &s.Name }),
	"mac":            str(func(s *VirtualRouterSpec) *string { return &s.MAC }),
	"description":    str(func(s *VirtualRouterSpec) *string { return &s.Description }),
	"enableSnat":     boolean(func(s *VirtualRouterSpec) *bool { return &s.EnableSnat }),
	"enableIpv6Snat": boolean(func(s *VirtualRouterSpec) *bool { return &s.EnableIpv6Snat }),
	"internal":       strs(func(s *VirtualRouterSpec) *[]string { return &s.Internal }),
	"external":       pointer(func(s *VirtualRouterSpec) **External { return &s.External }, externalFields),
	"peerRouter":     pointer(func(s *VirtualRouterSpec) **PeerRouter { return &s.PeerRouter }, peerRouterFields),
	"gateway":        str(func(s *VirtualRouterSpec) *string { return &s.Gateway }),
})

var externalFields = newTable(map[string]field[External]{
	"ip":      str(func(e *External) *string { return &e.IP }),
	"network": str(func(e *External) *string { return &e.Network }),
	"ipv6":    str(func(e *External) *string { return &e.IPv6 }),
})

var peerRouterFields = newTable(map[string]field[PeerRouter]{
	"ip":   str(func(p *PeerRouter) *string { return &p.IP }),
	"mac":  str(func(p *PeerRouter) *string { return &p.MAC }),
	"ipv6": str(func(p *PeerRouter) *string { return &p.IPv6 }),
})

// The NAD's network-config annotation is JSON, which NetworkFrom decodes
// on either path.
var nadFields = kindTable(map[string]field[NetworkAttachmentDefinition]{})

var vmiFields = kindTable(map[string]field[VirtualMachineInstance]{
	"spec":   nested(func(v *VirtualMachineInstance) *VirtualMachineInstanceSpec { return &v.Spec }, vmiSpecFields),
	"status": nested(func(v *VirtualMachineInstance) *VirtualMachineInstanceStatus { return &v.Status }, vmiStatusFields),
})

var vmiSpecFields = newTable(map[string]field[VirtualMachineInstanceSpec]{
	"domain":   nested(func(s *VirtualMachineInstanceSpec) *VMIDomain { return &s.Domain }, vmiDomainFields),
	"networks": list(func(s *VirtualMachineInstanceSpec) *[]VMINetwork { return &s.Networks }, vmiNetworkFields),
})

var vmiDomainFields = newTable(map[string]field[VMIDomain]{
	"devices": nested(func(d *VMIDomain) *VMIDevices { return &d.Devices }, vmiDevicesFields),
})

var vmiDevicesFields = newTable(map[string]field[VMIDevices]{
	"interfaces": list(func(d *VMIDevices) *[]VMIInterface { return &d.Interfaces }, vmiSpecInterfaceFields),
})

var vmiSpecInterfaceFields = newTable(map[string]field[VMIInterface]{
	"name":       str(func(i *VMIInterface) *string { return &i.Name }),
	"macAddress": str(func(i *VMIInterface) *string { return &i.MACAddress }),
})

var vmiNetworkFields = newTable(map[string]field[VMINetwork]{
	"name":   str(func(n *VMINetwork) *string { return &n.Name }),
	"multus": pointer(func(n *VMINetwork) **MultusNetwork { return &n.Multus }, multusFields),
})

var multusFields = newTable(map[string]field[MultusNetwork]{
	"networkName": str(func(m *MultusNetwork) *string { return &m.NetworkName }),
})

var vmiStatusFields = newTable(map[string]field[VirtualMachineInstanceStatus]{
	"nodeName":       str(func(s *VirtualMachineInstanceStatus) *string { return &s.NodeName }),
	"interfaces":     list(func(s *VirtualMachineInstanceStatus) *[]VMIInterfaceStatus { return &s.Interfaces }, vmiInterfaceFields),
	"migrationState": pointer(func(s *VirtualMachineInstanceStatus) **VMIMigrationState { return &s.MigrationState }, vmiMigrationFields),
})

var vmiMigrationFields = newTable(map[string]field[VMIMigrationState]{
	"sourceNode":   str(func(m *VMIMigrationState) *string { return &m.SourceNode }),
	"targetNode":   str(func(m *VMIMigrationState) *string { return &m.TargetNode }),
	"migrationUid": str(func(m *VMIMigrationState) *string { return &m.MigrationUID }),
	"completed":    boolean(func(m *VMIMigrationState) *bool { return &m.Completed }),
	"failed":       boolean(func(m *VMIMigrationState) *bool { return &m.Failed }),
	"abortStatus":  str(func(m *VMIMigrationState) *string { return &m.AbortStatus }),
})

var vmiInterfaceFields = newTable(map[string]field[VMIInterfaceStatus]{
	"name":        str(func(i *VMIInterfaceStatus) *string { return &i.Name }),
	"mac":         str(func(i *VMIInterfaceStatus) *string { return &i.MAC }),
	"ipAddress":   str(func(i *VMIInterfaceStatus) *string { return &i.IPAddress }),
	"ipAddresses": strs(func(i *VMIInterfaceStatus) *[]string { return &i.IPAddresses }),
})

var floatingIPFields = kindTable(map[string]field[FloatingIP]{
	"spec": nested(func(f *FloatingIP) *FloatingIPSpec { return &f.Spec }, floatingIPSpecFields),
})

var floatingIPSpecFields = newTable(map[string]field[FloatingIPSpec]{
	"id":          str(func(s *FloatingIPSpec) *string { return &s.ID }),
	"routerName":  str(func(s *FloatingIPSpec) *string { return &s.RouterName }),
	"networkName": str(func(s *FloatingIPSpec) *string { return &s.NetworkName }),
	"floatingIp":  str(func(s *FloatingIPSpec) *string { return &s.FloatingIP }),
	"fixedIp":     str(func(s *FloatingIPSpec) *string { return &s.FixedIP }),
	"vmName":      str(func(s *FloatingIPSpec) *string { return &s.VMName }),
	"podName":     str(func(s *FloatingIPSpec) *string { return &s.PodName }),
})

// object decodes the object (or list) at node n, as addObject does.
func (f *fastDecoder) object(where string, n int32) error {
	if f.p.nodes[n].kind != yMap {
		return errUnsupported
	}
	h := &f.head
	*h = header{items: -1}
	if err := headerFields.decode(f, n, h); err != nil {
		return err
	}
	items := h.items
	hasItems := items >= 0 && !f.isNull(items)
	switch {
	case isList(h.Kind, hasItems):
		if !hasItems {
			return nil
		}
		for e, i := f.p.nodes[items].first, 0; e >= 0; e, i = f.p.nodes[e].next, i+1 {
			if err := f.object(fmt.Sprintf("%s: items[%d]", where, i), e); err != nil {
				return err
			}
		}
		return nil
	case h.APIVersion == KubevirtV1 && h.Kind == KindRouter:
		vr := &f.router
		*vr = VirtualRouter{TypeMeta: h.TypeMeta, ObjectMeta: h.ObjectMeta}
		if err := routerFields.decode(f, n, vr); err != nil {
			return err
		}
		f.decoded(vr)
		return f.set.applyRouter(where, vr)
	case h.APIVersion == CNCFV1 && h.Kind == KindNAD:
		nad := &f.nad
		*nad = NetworkAttachmentDefinition{TypeMeta: h.TypeMeta, ObjectMeta: h.ObjectMeta}
		if err := nadFields.decode(f, n, nad); err != nil {
			return err
		}
		f.decoded(nad)
		return f.set.applyNAD(where, nad)
	case h.APIVersion == KubevirtV1 && h.Kind == KindVMI:
		vmi := &f.vmi
		*vmi = VirtualMachineInstance{TypeMeta: h.TypeMeta, ObjectMeta: h.ObjectMeta}
		if err := vmiFields.decode(f, n, vmi); err != nil {
			return err
		}
		f.decoded(vmi)
		f.set.applyVMI(where, vmi)
		return nil
	case h.APIVersion == KubevirtV1 && h.Kind == KindLoadBalancer:
		// Rare and small: the general path reads the file.
		return errUnsupported
	case h.APIVersion == KubevirtV1 && isFloatingIP(h.Kind):
		fip := &f.fip
		*fip = FloatingIP{TypeMeta: h.TypeMeta, ObjectMeta: h.ObjectMeta}
		if err := floatingIPFields.decode(f, n, fip); err != nil {
			return err
		}
		f.decoded(fip)
		return f.set.applyFloatingIP(where, fip)
	case h.APIVersion == KubevirtV1 && (h.Kind == KindSecurityGroup || h.Kind == KindSecurityGroupRule):
		// Few and small: the general path reads them.
		return errUnsupported
	}
	f.set.ignored(where, &h.TypeMeta, &h.ObjectMeta)
	return nil
}

func (f *fastDecoder) decoded(obj any) {
	if f.onObject != nil {
		f.onObject(obj)
	}
}

// str decodes a string: a null leaves it as it is.
func (f *fastDecoder) str(n int32, into *string) error {
	nd := &f.p.nodes[n]
	switch {
	case nd.kind == yNull:
		return nil
	case nd.kind != yScalar:
		return errUnsupported
	case nd.quoted || plainKind(nd.value) == plainString:
		*into = nd.value
		return nil
	}
	return errUnsupported
}

func (f *fastDecoder) boolean(n int32, into *bool) error {
	nd := &f.p.nodes[n]
	switch {
	case nd.kind == yNull:
		return nil
	case nd.kind != yScalar || nd.quoted:
		return errUnsupported
	}
	switch plainKind(nd.value) {
	case plainTrue:
		*into = true
		return nil
	case plainFalse:
		*into = false
		return nil
	}
	return errUnsupported
}

func (f *fastDecoder) count(n int32) int {
	c := 0
	for k := f.p.nodes[n].first; k >= 0; k = f.p.nodes[k].next {
		c++
	}
	return c
}

func (f *fastDecoder) strings(n int32, into *[]string) error {
	nd := f.p.nodes[n]
	switch nd.kind {
	case yNull:
		*into = nil
		return nil
	case ySeq:
	default:
		return errUnsupported
	}
	out := make([]string, f.count(n))
	for e, i := nd.first, 0; e >= 0; e, i = f.p.nodes[e].next, i+1 {
		if err := f.str(e, &out[i]); err != nil {
			return err
		}
	}
	*into = out
	return nil
}

func (f *fastDecoder) stringMap(n int32, into *map[string]string) error {
	nd := f.p.nodes[n]
	switch nd.kind {
	case yNull:
		*into = nil
		return nil
	case yMap:
	default:
		return errUnsupported
	}
	m := make(map[string]string, f.count(n)/2)
	for k := nd.first; k >= 0; {
		v := f.p.nodes[k].next
		if f.p.nodes[v].kind == yNull {
			return errUnsupported
		}
		var s string
		if err := f.str(v, &s); err != nil {
			return err
		}
		m[f.p.nodes[k].value] = s
		k = f.p.nodes[v].next
	}
	*into = m
	return nil
}

// isNull tells a null, which leaves a pointer, slice or map nil.
func (f *fastDecoder) isNull(n int32) bool { return f.p.nodes[n].kind == yNull }
