package manifest

import (
	"bytes"
	"fmt"
	"reflect"
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
	if !plainASCII(data) || looksJSON(data) {
		return nil, errUnsupported
	}
	text := string(data)
	f := &fastDecoder{set: &Set{}}
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

type fastDecoder struct {
	p   yparser
	set *Set
}

// Field names as encoding/json matches them, per Go type: a key that
// matches one only case-insensitively is left to the general path.
var (
	topFields       = jsonNames(reflect.TypeFor[objectMeta](), reflect.TypeFor[VirtualRouter](), reflect.TypeFor[VirtualMachineInstance]())
	metaFields      = jsonNames(reflect.TypeFor[metav1.ObjectMeta]())
	routerFields    = jsonNames(reflect.TypeFor[VirtualRouterSpec]())
	externalFields  = jsonNames(reflect.TypeFor[External]())
	peerFields      = jsonNames(reflect.TypeFor[PeerRouter]())
	vmiSpecFields   = jsonNames(reflect.TypeFor[VirtualMachineInstance]().Field(2).Type)
	vmiStatusFields = jsonNames(reflect.TypeFor[VirtualMachineInstance]().Field(3).Type)
	vmiNetFields    = jsonNames(reflect.TypeFor[VMINetwork]())
	multusFields    = jsonNames(reflect.TypeFor[VMINetwork]().Field(1).Type.Elem())
	ifaceFields     = jsonNames(reflect.TypeFor[VMIInterfaceStatus]())
)

// jsonNames lists the JSON names of the fields of struct types, embedded
// structs without a name included.
func jsonNames(types ...reflect.Type) []string {
	var names []string
	for _, t := range types {
		for i := range t.NumField() {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			switch {
			case name == "-" || !sf.IsExported():
			case sf.Anonymous && name == "":
				names = append(names, jsonNames(sf.Type)...)
			case name == "":
				names = append(names, sf.Name)
			default:
				names = append(names, name)
			}
		}
	}
	return names
}

// fields calls fn for each key of mapping n that is one of want (by index),
// ignores keys the Go type does not have (all its JSON names are in names),
// and gives up on the others: a field named twice, or matched only
// case-insensitively, or one the fast reader does not decode. A null
// leaves the struct as it is.
func (f *fastDecoder) fields(n int32, want, names []string, fn func(i int, v int32) error) error {
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
		i := indexOf(want, key)
		switch {
		case i >= 0:
			if seen&(1<<i) != 0 {
				return errUnsupported
			}
			seen |= 1 << i
			if err := fn(i, v); err != nil {
				return err
			}
		case foldsTo(names, key):
			return errUnsupported
		}
		k = f.p.nodes[v].next
	}
	return nil
}

func indexOf(names []string, s string) int {
	for i, n := range names {
		if n == s {
			return i
		}
	}
	return -1
}

func foldsTo(names []string, s string) bool {
	for _, n := range names {
		if strings.EqualFold(n, s) {
			return true
		}
	}
	return false
}

// str decodes a string field: JSON null leaves it empty.
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

// each calls fn for the entries of sequence n; a null has none.
func (f *fastDecoder) each(n int32, fn func(v int32) error) error {
	nd := f.p.nodes[n]
	switch nd.kind {
	case yNull:
		return nil
	case ySeq:
	default:
		return errUnsupported
	}
	return f.forEach(nd.first, fn)
}

func (f *fastDecoder) forEach(c int32, fn func(v int32) error) error {
	for ; c >= 0; c = f.p.nodes[c].next {
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
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
	i := 0
	err := f.forEach(nd.first, func(v int32) error {
		err := f.str(v, &out[i])
		i++
		return err
	})
	*into = out
	return err
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

var metaWant = []string{"name", "namespace", "generateName", "uid", "resourceVersion", "selfLink", "labels", "annotations", "creationTimestamp"}

func (f *fastDecoder) meta(n int32, om *metav1.ObjectMeta) error {
	return f.fields(n, metaWant, metaFields, func(i int, v int32) error {
		switch i {
		case 0:
			return f.str(v, &om.Name)
		case 1:
			return f.str(v, &om.Namespace)
		case 2:
			return f.str(v, &om.GenerateName)
		case 3:
			var uid string
			err := f.str(v, &uid)
			om.UID = types.UID(uid)
			return err
		case 4:
			return f.str(v, &om.ResourceVersion)
		case 5:
			return f.str(v, &om.SelfLink)
		case 6:
			return f.stringMap(v, &om.Labels)
		case 7:
			return f.stringMap(v, &om.Annotations)
		default:
			nd := &f.p.nodes[v]
			if nd.kind == yNull {
				om.CreationTimestamp = metav1.Time{}
				return nil
			}
			if nd.kind != yScalar || !nd.quoted {
				return errUnsupported
			}
			t, err := time.Parse(time.RFC3339, nd.value)
			if err != nil {
				return errUnsupported
			}
			om.CreationTimestamp = metav1.NewTime(t.Local())
			return nil
		}
	})
}

var topWant = []string{"apiVersion", "kind", "metadata", "items", "spec", "status"}

// object decodes the object (or list) at mapping n, as addObject does.
func (f *fastDecoder) object(where string, n int32) error {
	if f.p.nodes[n].kind != yMap {
		return errUnsupported
	}
	var tm metav1.TypeMeta
	var om metav1.ObjectMeta
	items, spec, status := int32(-1), int32(-1), int32(-1)
	err := f.fields(n, topWant, topFields, func(i int, v int32) error {
		switch i {
		case 0:
			return f.str(v, &tm.APIVersion)
		case 1:
			return f.str(v, &tm.Kind)
		case 2:
			return f.meta(v, &om)
		case 3:
			items = v
		case 4:
			spec = v
		default:
			status = v
		}
		return nil
	})
	if err != nil {
		return err
	}
	if items >= 0 && !f.isNull(items) && f.p.nodes[items].kind != ySeq {
		return errUnsupported
	}
	switch {
	case isList(tm.Kind, items >= 0 && !f.isNull(items)):
		if items < 0 {
			return nil
		}
		i := 0
		err := f.each(items, func(v int32) error {
			err := f.object(fmt.Sprintf("%s: items[%d]", where, i), v)
			i++
			return err
		})
		return err
	case tm.APIVersion == KubevirtV1 && tm.Kind == KindRouter:
		vr := VirtualRouter{TypeMeta: tm, ObjectMeta: om}
		if spec >= 0 {
			if err := f.routerSpec(spec, &vr.Spec); err != nil {
				return err
			}
		}
		return f.set.applyRouter(where, &vr)
	case tm.APIVersion == CNCFV1 && tm.Kind == KindNAD:
		return f.set.applyNAD(where, &NetworkAttachmentDefinition{TypeMeta: tm, ObjectMeta: om})
	case tm.APIVersion == KubevirtV1 && tm.Kind == KindVMI:
		vmi := VirtualMachineInstance{TypeMeta: tm, ObjectMeta: om}
		if spec >= 0 {
			if err := f.vmiSpec(spec, &vmi); err != nil {
				return err
			}
		}
		if status >= 0 {
			if err := f.vmiStatus(status, &vmi); err != nil {
				return err
			}
		}
		f.set.applyVMI(where, &vmi)
		return nil
	}
	f.set.ignored(where, &tm, &om)
	return nil
}

var routerWant = []string{"name", "mac", "description", "enableSnat", "internal", "external", "peerRouter", "gateway"}

func (f *fastDecoder) routerSpec(n int32, s *VirtualRouterSpec) error {
	return f.fields(n, routerWant, routerFields, func(i int, v int32) error {
		switch i {
		case 0:
			return f.str(v, &s.Name)
		case 1:
			return f.str(v, &s.MAC)
		case 2:
			return f.str(v, &s.Description)
		case 3:
			return f.boolean(v, &s.EnableSnat)
		case 4:
			return f.strings(v, &s.Internal)
		case 5:
			if f.isNull(v) {
				s.External = nil
				return nil
			}
			s.External = &External{}
			return f.fields(v, []string{"ip", "network"}, externalFields, func(i int, v int32) error {
				if i == 0 {
					return f.str(v, &s.External.IP)
				}
				return f.str(v, &s.External.Network)
			})
		case 6:
			if f.isNull(v) {
				s.PeerRouter = nil
				return nil
			}
			s.PeerRouter = &PeerRouter{}
			return f.fields(v, []string{"ip", "mac"}, peerFields, func(i int, v int32) error {
				if i == 0 {
					return f.str(v, &s.PeerRouter.IP)
				}
				return f.str(v, &s.PeerRouter.MAC)
			})
		default:
			return f.str(v, &s.Gateway)
		}
	})
}

func (f *fastDecoder) vmiSpec(n int32, vmi *VirtualMachineInstance) error {
	return f.fields(n, []string{"networks"}, vmiSpecFields, func(_ int, v int32) error {
		if f.isNull(v) {
			vmi.Spec.Networks = nil
			return nil
		}
		nets := make([]VMINetwork, 0, f.count(v))
		err := f.each(v, func(e int32) error {
			if f.isNull(e) {
				return errUnsupported
			}
			nets = append(nets, VMINetwork{})
			net := &nets[len(nets)-1]
			return f.fields(e, []string{"name", "multus"}, vmiNetFields, func(i int, v int32) error {
				if i == 0 {
					return f.str(v, &net.Name)
				}
				if f.isNull(v) {
					net.Multus = nil
					return nil
				}
				net.Multus = &struct {
					NetworkName string `json:"networkName"`
				}{}
				return f.fields(v, []string{"networkName"}, multusFields, func(_ int, v int32) error {
					return f.str(v, &net.Multus.NetworkName)
				})
			})
		})
		vmi.Spec.Networks = nets
		return err
	})
}

func (f *fastDecoder) vmiStatus(n int32, vmi *VirtualMachineInstance) error {
	return f.fields(n, []string{"nodeName", "interfaces"}, vmiStatusFields, func(i int, v int32) error {
		if i == 0 {
			return f.str(v, &vmi.Status.NodeName)
		}
		if f.isNull(v) {
			vmi.Status.Interfaces = nil
			return nil
		}
		ifaces := make([]VMIInterfaceStatus, 0, f.count(v))
		err := f.each(v, func(e int32) error {
			if f.isNull(e) {
				return errUnsupported
			}
			ifaces = append(ifaces, VMIInterfaceStatus{})
			st := &ifaces[len(ifaces)-1]
			return f.fields(e, []string{"name", "mac", "ipAddress", "ipAddresses"}, ifaceFields, func(i int, v int32) error {
				switch i {
				case 0:
					return f.str(v, &st.Name)
				case 1:
					return f.str(v, &st.MAC)
				case 2:
					return f.str(v, &st.IPAddress)
				default:
					return f.strings(v, &st.IPAddresses)
				}
			})
		})
		vmi.Status.Interfaces = ifaces
		return err
	})
}
