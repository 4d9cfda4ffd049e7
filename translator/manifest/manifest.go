// Package manifest reads the manifests ONOS kubevirt-networking users already
// have (VirtualRouter, NetworkAttachmentDefinition with a network-config
// annotation, VirtualMachineInstance, FloatingIp) from YAML or JSON into a
// translator.Objects.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// API groups and kinds read from manifests.
const (
	KubevirtV1 = "kubevirt.io/v1"
	CNCFV1     = "k8s.cni.cncf.io/v1"
	KindRouter = "VirtualRouter"
	KindNAD    = "NetworkAttachmentDefinition"
	KindVMI    = "VirtualMachineInstance"
	// KindFloatingIP is ONOS's floating IP; ONOS read only its spec, and
	// manifests spell the kind both ways (KindFloatingIPUpper).
	KindFloatingIP      = "FloatingIp"
	KindFloatingIPUpper = "FloatingIP"
	// KindLoadBalancer is ONOS's load balancer.
	KindLoadBalancer        = "LoadBalancer"
	NetworkConfigAnnotation = "network-config"
)

// VirtualRouter is the kubevirt.io/v1 VirtualRouter object.
type VirtualRouter struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              VirtualRouterSpec `json:"spec"`
}

// VirtualRouterSpec is the router as ONOS kubevirt-networking accepted it.
type VirtualRouterSpec struct {
	Name        string `json:"name,omitempty"`
	MAC         string `json:"mac,omitempty"`
	Description string `json:"description,omitempty"`
	EnableSnat  bool   `json:"enableSnat,omitempty"`
	// EnableIpv6Snat is kubevirt-ovn's: NAT66 of the internal ipv6Cidrs.
	EnableIpv6Snat bool        `json:"enableIpv6Snat,omitempty"`
	Internal       []string    `json:"internal,omitempty"`
	External       *External   `json:"external,omitempty"`
	PeerRouter     *PeerRouter `json:"peerRouter,omitempty"`
	Gateway        string      `json:"gateway,omitempty"`
}

// External is spec.external.
type External struct {
	IP      string `json:"ip"`
	Network string `json:"network"`
	// IPv6 is kubevirt-ovn's: the router's IPv6 address on the network.
	IPv6 string `json:"ipv6,omitempty"`
}

// PeerRouter is spec.peerRouter.
type PeerRouter struct {
	IP  string `json:"ip,omitempty"`
	MAC string `json:"mac,omitempty"`
	// IPv6 is kubevirt-ovn's: the peer's IPv6 address.
	IPv6 string `json:"ipv6,omitempty"`
}

// NetworkAttachmentDefinition is the k8s.cni.cncf.io/v1 object; kubevirt-ovn
// reads only its network-config annotation.
type NetworkAttachmentDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// NetworkConfig is the JSON in the network-config annotation, as ONOS users
// wrote it.
type NetworkConfig struct {
	Type                string      `json:"type"`
	MTU                 flexString  `json:"mtu"`
	SegmentID           flexString  `json:"segmentId"`
	GatewayIP           string      `json:"gatewayIp"`
	CIDR                string      `json:"cidr"`
	HostRoutes          []HostRoute `json:"hostRoutes"`
	IPPool              *IPPool     `json:"ipPool"`
	DNSes               []string    `json:"dnses"`
	DefaultRoute        *bool       `json:"defaultRoute"`
	PhysicalNetworkName string      `json:"physicalNetworkName"`
	// IPv6CIDR and IPv6GatewayIP are kubevirt-ovn's extension for a dual
	// stack network (translator.Network.IPv6CIDR); ONOS had neither.
	IPv6CIDR      string `json:"ipv6Cidr"`
	IPv6GatewayIP string `json:"ipv6GatewayIp"`
	// IPv6AddressMode is how its VMs get their IPv6 address
	// (translator.Network.IPv6AddressMode).
	IPv6AddressMode string `json:"ipv6AddressMode"`
	// IPv6Pool is the ipPool of ipv6Cidr (translator.Network.IPv6Pool).
	IPv6Pool *IPPool `json:"ipv6Pool"`
}

// HostRoute is a network-config host route.
type HostRoute struct {
	Destination string `json:"destination"`
	Nexthop     string `json:"nexthop"`
}

// IPPool is a network-config address pool.
type IPPool struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// VirtualMachineInstance is the part of kubevirt.io/v1 VirtualMachineInstance
// kubevirt-ovn reads.
type VirtualMachineInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              VirtualMachineInstanceSpec   `json:"spec"`
	Status            VirtualMachineInstanceStatus `json:"status"`
}

// VirtualMachineInstanceSpec is the part of a VMI's spec kubevirt-ovn reads.
type VirtualMachineInstanceSpec struct {
	Domain   VMIDomain    `json:"domain,omitempty"`
	Networks []VMINetwork `json:"networks,omitempty"`
}

// VMIDomain is the part of spec.domain kubevirt-ovn reads.
type VMIDomain struct {
	Devices VMIDevices `json:"devices,omitempty"`
}

// VMIDevices is the part of spec.domain.devices kubevirt-ovn reads.
type VMIDevices struct {
	Interfaces []VMIInterface `json:"interfaces,omitempty"`
}

// VMIInterface is an entry of spec.domain.devices.interfaces: its name is
// the spec.networks entry's, its macAddress the MAC the VM is given.
type VMIInterface struct {
	Name       string `json:"name"`
	MACAddress string `json:"macAddress,omitempty"`
}

// InterfacesAnnotation is ONOS kubevirt-networking's annotation of a VM's
// template (KubeVirt copies it onto the VMI): the fixed IP of each network,
// a JSON list of InterfaceAddress.
const InterfacesAnnotation = "interfaces"

// MigrationActivationAnnotation says, on a VMI (KubeVirt copies it from
// its VM's template), how its ports follow a live migration: "rarp" (the
// default: blocked on the target until the VM's RARP there) or "none"
// (a VM that sends no RARP: bound on both chassis until the migration
// completed).
const MigrationActivationAnnotation = "kubevirt-ovn.io/migration-activation"

// VMIAnnotations are the annotations of a VMI that VMInterfacesFrom reads,
// and all the Kubernetes source keeps of a VMI's annotations: a reader of
// another one adds it here.
var VMIAnnotations = []string{InterfacesAnnotation, MigrationActivationAnnotation, SecurityGroupsAnnotation}

// InterfaceAddress is an entry of the interfaces annotation.
type InterfaceAddress struct {
	Network   string `json:"network"`
	IPAddress string `json:"ipAddress"`
	// IPv6Address is kubevirt-ovn's: the interface's IPv6 address on a
	// dual stack network, in place of what status reports.
	IPv6Address string `json:"ipv6Address,omitempty"`
}

// VirtualMachineInstanceStatus is the part of a VMI's status kubevirt-ovn
// reads.
type VirtualMachineInstanceStatus struct {
	NodeName       string               `json:"nodeName,omitempty"`
	Interfaces     []VMIInterfaceStatus `json:"interfaces,omitempty"`
	MigrationState *VMIMigrationState   `json:"migrationState,omitempty"`
}

// VMIMigrationState is the part of a VMI's status.migrationState (its
// last or running live migration, KubeVirt's field names) kubevirt-ovn
// reads.
type VMIMigrationState struct {
	SourceNode   string `json:"sourceNode,omitempty"`
	TargetNode   string `json:"targetNode,omitempty"`
	MigrationUID string `json:"migrationUid,omitempty"`
	Completed    bool   `json:"completed,omitempty"`
	Failed       bool   `json:"failed,omitempty"`
	// AbortStatus is Succeeded, Failed or Aborting.
	AbortStatus string `json:"abortStatus,omitempty"`
	// TargetField is where TargetNode was read when not from the VMI
	// (the target pod's spec.nodeName, set by the Kubernetes source).
	TargetField string `json:"-"`
}

// VMINetwork is an entry of a VMI's spec.networks.
type VMINetwork struct {
	Name   string         `json:"name"`
	Multus *MultusNetwork `json:"multus,omitempty"`
}

// MultusNetwork is spec.networks[].multus: the NAD an interface attaches to.
type MultusNetwork struct {
	NetworkName string `json:"networkName"`
}

// VMIInterfaceStatus is an entry of a VMI's status.interfaces.
type VMIInterfaceStatus struct {
	Name        string   `json:"name"`
	MAC         string   `json:"mac"`
	IPAddress   string   `json:"ipAddress"`
	IPAddresses []string `json:"ipAddresses"`
}

// FloatingIP is the kubevirt.io/v1 floating IP object (plural
// floatingips, cluster-scoped), kind FloatingIp or FloatingIP.
type FloatingIP struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              FloatingIPSpec `json:"spec"`
}

// FloatingIPSpec is the floating IP as ONOS kubevirt-networking accepted
// it: id, routerName, networkName and floatingIp required.
type FloatingIPSpec struct {
	ID          string `json:"id,omitempty"`
	RouterName  string `json:"routerName,omitempty"`
	NetworkName string `json:"networkName,omitempty"`
	FloatingIP  string `json:"floatingIp,omitempty"`
	FixedIP     string `json:"fixedIp,omitempty"`
	VMName      string `json:"vmName,omitempty"`
	PodName     string `json:"podName,omitempty"`
}

// isFloatingIP says whether kind is a floating IP's.
func isFloatingIP(kind string) bool { return kind == KindFloatingIP || kind == KindFloatingIPUpper }

// flexString holds a JSON string or number as its text: ONOS users wrote
// segmentId both ways.
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(strings.TrimSpace(s))
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a string or a number, got %s", b)
	}
	*f = flexString(n.String())
	return nil
}

// Set is what a set of manifests declares.
type Set struct {
	Objects translator.Objects
	// Notes are objects that were read but ignored, with the reason.
	Notes []string
}

// LoadPaths reads every manifest in paths (see Files for which files a
// path names). Any file that cannot be read or decoded, or that is being
// written (ErrIncomplete), fails the whole load: a router missing from the
// input would otherwise have its rows deleted.
func LoadPaths(paths []string) (*Set, error) {
	files, err := Files(paths)
	if err != nil {
		return nil, err
	}
	set := &Set{}
	for _, f := range files {
		data, err := readComplete(f)
		if err != nil {
			return nil, err
		}
		if err := set.Add(f, data); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// Add decodes the (multi-document YAML or JSON) manifest data read from
// source and adds its objects to the set.
func (s *Set) Add(source string, data []byte) error {
	if f, err := decodeFast(source, data); err == nil {
		s.merge(&f.Objects, f.Notes)
		return nil
	}
	return s.addGeneral(source, data)
}

// merge adds the objects and notes of one file to s, in order; an invalid
// unit named again replaces the earlier entry, as a second Add would.
func (s *Set) merge(objs *translator.Objects, notes []string) {
	s.Objects.Routers = append(s.Objects.Routers, objs.Routers...)
	s.Objects.Networks = append(s.Objects.Networks, objs.Networks...)
	s.Objects.VMs = append(s.Objects.VMs, objs.VMs...)
	s.Objects.FloatingIPs = append(s.Objects.FloatingIPs, objs.FloatingIPs...)
	s.Objects.SecurityGroups = append(s.Objects.SecurityGroups, objs.SecurityGroups...)
	s.Objects.SecurityGroupRules = append(s.Objects.SecurityGroupRules, objs.SecurityGroupRules...)
	s.Objects.LoadBalancers = append(s.Objects.LoadBalancers, objs.LoadBalancers...)
	for u, err := range objs.Invalid {
		s.invalid(u, err)
	}
	s.Notes = append(s.Notes, notes...)
}

// addGeneral is the general path: each document converted from YAML to
// JSON, then decoded as JSON, as Kubernetes reads manifests. It reads
// whatever the fast path (yamlfast.go) leaves to it, and says what is wrong
// with a manifest.
func (s *Set) addGeneral(source string, data []byte) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", source, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			continue
		}
		if err := s.addObject(fmt.Sprintf("%s: document %d", source, doc), raw); err != nil {
			return err
		}
	}
}

// objectMeta is what every object is first decoded into.
type objectMeta struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Items             []json.RawMessage `json:"items,omitempty"`
}

func isList(kind string, hasItems bool) bool {
	return kind == "List" || strings.HasSuffix(kind, "List") && hasItems
}

func (s *Set) addObject(where string, raw json.RawMessage) error {
	var meta objectMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	switch {
	case isList(meta.Kind, meta.Items != nil):
		for i, item := range meta.Items {
			if err := s.addObject(fmt.Sprintf("%s: items[%d]", where, i), item); err != nil {
				return err
			}
		}
		return nil
	case meta.APIVersion == KubevirtV1 && meta.Kind == KindRouter:
		return s.addRouter(where, raw)
	case meta.APIVersion == CNCFV1 && meta.Kind == KindNAD:
		return s.addNAD(where, raw)
	case meta.APIVersion == KubevirtV1 && meta.Kind == KindVMI:
		return s.addVMI(where, raw)
	case meta.APIVersion == KubevirtV1 && isFloatingIP(meta.Kind):
		return s.addFloatingIP(where, raw)
	case meta.APIVersion == KubevirtV1 && meta.Kind == KindSecurityGroup:
		return s.addSecurityGroup(where, raw)
	case meta.APIVersion == KubevirtV1 && meta.Kind == KindSecurityGroupRule:
		return s.addSecurityGroupRule(where, raw)
	case meta.APIVersion == KubevirtV1 && meta.Kind == KindLoadBalancer:
		return s.addLoadBalancer(where, raw)
	}
	s.ignored(where, &meta.TypeMeta, &meta.ObjectMeta)
	return nil
}

func (s *Set) ignored(where string, tm *metav1.TypeMeta, om *metav1.ObjectMeta) {
	s.Notes = append(s.Notes, fmt.Sprintf("%s: ignored %s %s %s: not a kind kubevirt-ovn reads", where, tm.APIVersion, tm.Kind, om.Name))
}

func decodeErr(where, kind, name string, err error) error {
	return fmt.Errorf("%s: %s %s: %w", where, kind, name, err)
}

func (s *Set) addRouter(where string, raw json.RawMessage) error {
	// A field of the wrong type still leaves metadata decoded: the error
	// names the object.
	var vr VirtualRouter
	if err := json.Unmarshal(raw, &vr); err != nil {
		return decodeErr(where, KindRouter, vr.Name, err)
	}
	return s.applyRouter(where, &vr)
}

func (s *Set) applyRouter(where string, vr *VirtualRouter) error {
	r, err := RouterFrom(vr)
	switch {
	case err == nil:
		s.Objects.Routers = append(s.Objects.Routers, r)
	case vr.Name != "":
		// A router that decodes but whose spec contradicts its name is one
		// object's bad input: it fails and keeps its rows, the others sync.
		s.invalid(translator.Unit{Kind: translator.KindRouter, Name: vr.Name},
			&translator.InputError{Kind: translator.ObjVirtualRouter, Object: vr.Name, Msg: fmt.Sprintf("%v (%s)", err, where)})
	default:
		// Without a name nothing says which rows are its: fail the load.
		return decodeErr(where, KindRouter, vr.Name, err)
	}
	return nil
}

// invalid records an object that is identified but does not convert: its
// unit fails and keeps its rows.
func (s *Set) invalid(u translator.Unit, err error) {
	if s.Objects.Invalid == nil {
		s.Objects.Invalid = map[translator.Unit]error{}
	}
	s.Objects.Invalid[u] = err
}

// RouterFrom converts a VirtualRouter object to the translator's input.
func RouterFrom(vr *VirtualRouter) (translator.Router, error) {
	name := vr.Name
	switch {
	case name == "" && vr.Spec.Name == "":
		return translator.Router{}, errors.New("metadata.name is empty")
	case name == "":
		name = vr.Spec.Name
	case vr.Spec.Name != "" && vr.Spec.Name != name:
		return translator.Router{}, fmt.Errorf("spec.name %s differs from metadata.name %s", vr.Spec.Name, name)
	}
	r := translator.Router{
		Name:           name,
		MAC:            vr.Spec.MAC,
		Description:    vr.Spec.Description,
		EnableSNAT:     vr.Spec.EnableSnat,
		EnableIPv6SNAT: vr.Spec.EnableIpv6Snat,
		Internal:       slices.Clone(vr.Spec.Internal),
		Gateway:        vr.Spec.Gateway,
		Created:        vr.CreationTimestamp.Time,
	}
	if e := vr.Spec.External; e != nil && (e.IP != "" || e.Network != "") {
		r.External = &translator.External{IP: e.IP, Network: e.Network, IPv6: e.IPv6}
	}
	if pr := vr.Spec.PeerRouter; pr != nil && (pr.IP != "" || pr.MAC != "" || pr.IPv6 != "") {
		r.PeerRouter = &translator.PeerRouter{IP: pr.IP, MAC: pr.MAC, IPv6: pr.IPv6}
	}
	return r, nil
}

func (s *Set) addNAD(where string, raw json.RawMessage) error {
	var nad NetworkAttachmentDefinition
	if err := json.Unmarshal(raw, &nad); err != nil {
		return decodeErr(where, KindNAD, nad.Name, err)
	}
	return s.applyNAD(where, &nad)
}

func (s *Set) applyNAD(where string, nad *NetworkAttachmentDefinition) error {
	if nad.Namespace == "" {
		nad.Namespace = "default"
	}
	n, ok, err := NetworkFrom(nad)
	if err != nil {
		return decodeErr(where, KindNAD, nad.Namespace+"/"+nad.Name, err)
	}
	if !ok {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: ignored %s %s/%s: no %s annotation", where, KindNAD, nad.Namespace, nad.Name, NetworkConfigAnnotation))
		return nil
	}
	s.Objects.Networks = append(s.Objects.Networks, n)
	return nil
}

// NetworkFrom converts a NAD to the translator's input; ok is false for a NAD
// without a network-config annotation (not one of ours).
func NetworkFrom(nad *NetworkAttachmentDefinition) (n translator.Network, ok bool, err error) {
	cfgText, ok := nad.Annotations[NetworkConfigAnnotation]
	if !ok {
		return translator.Network{}, false, nil
	}
	var cfg NetworkConfig
	if err := json.Unmarshal([]byte(cfgText), &cfg); err != nil {
		return translator.Network{}, true, fmt.Errorf("metadata.annotations[%s] is not valid network-config JSON: %w", NetworkConfigAnnotation, err)
	}
	ns := nad.Namespace
	if ns == "" {
		ns = "default"
	}
	n = translator.Network{
		Name:                nad.Name,
		Namespace:           ns,
		Type:                translator.NetworkType(cfg.Type),
		SegmentID:           string(cfg.SegmentID),
		GatewayIP:           cfg.GatewayIP,
		CIDR:                cfg.CIDR,
		PhysicalNetworkName: cfg.PhysicalNetworkName,
		IPv6CIDR:            cfg.IPv6CIDR,
		IPv6GatewayIP:       cfg.IPv6GatewayIP,
		IPv6AddressMode:     cfg.IPv6AddressMode,
		DNSes:               cfg.DNSes,
		DefaultRoute:        cfg.DefaultRoute != nil && *cfg.DefaultRoute,
	}
	if cfg.MTU != "" {
		mtu, err := strconv.Atoi(string(cfg.MTU))
		if err != nil {
			return n, true, fmt.Errorf("network-config.mtu %q is not a number", cfg.MTU)
		}
		n.MTU = mtu
	}
	for _, hr := range cfg.HostRoutes {
		n.HostRoutes = append(n.HostRoutes, translator.HostRoute{Destination: hr.Destination, Nexthop: hr.Nexthop})
	}
	if cfg.IPPool != nil {
		n.IPPool = &translator.IPPool{Start: cfg.IPPool.Start, End: cfg.IPPool.End}
	}
	if cfg.IPv6Pool != nil {
		n.IPv6Pool = &translator.IPPool{Start: cfg.IPv6Pool.Start, End: cfg.IPv6Pool.End}
	}
	return n, true, nil
}

func (s *Set) addVMI(where string, raw json.RawMessage) error {
	var vmi VirtualMachineInstance
	if err := json.Unmarshal(raw, &vmi); err != nil {
		return decodeErr(where, KindVMI, vmi.Namespace+"/"+vmi.Name, err)
	}
	s.applyVMI(where, &vmi)
	return nil
}

func (s *Set) applyVMI(where string, vmi *VirtualMachineInstance) {
	ifaces, notes := VMInterfacesFrom(vmi)
	for _, n := range notes {
		s.Notes = append(s.Notes, where+": "+n)
	}
	s.Objects.VMs = append(s.Objects.VMs, ifaces...)
}

// VMInterfacesFrom returns the multus interfaces of a VMI whose MAC is
// known (its IPv4 address may not be: an IPv6-only network needs none);
// notes say which were skipped and why. A VM needs its address
// before it boots, for DHCP: the IP is the interfaces annotation's entry of
// the interface's network, the MAC the spec's macAddress of the
// interface; status.interfaces gives either when they are not declared.
// Where a declared value and the status's are both there, the status's is
// kept beside it (VMInterface.StatusMAC, StatusIP): the planner compares
// them.
func VMInterfacesFrom(vmi *VirtualMachineInstance) ([]translator.VMInterface, []string) {
	ns := vmi.Namespace
	if ns == "" {
		ns = "default"
	}
	var out []translator.VMInterface
	var notes []string
	var declared []InterfaceAddress
	groups, note := securityGroupsOf(vmi.Annotations, ns, vmi.Name)
	if note != "" {
		notes = append(notes, note)
	}
	if text, ok := vmi.Annotations[InterfacesAnnotation]; ok {
		if err := json.Unmarshal([]byte(text), &declared); err != nil {
			notes = append(notes, fmt.Sprintf("%s %s/%s: metadata.annotations[%s] is not a JSON list of {network, ipAddress}, ignored: %v", KindVMI, ns, vmi.Name, InterfacesAnnotation, err))
			declared = nil
		}
	}
	node, target, uid := migrationNodes(&vmi.Status)
	noActivation := false
	switch a := vmi.Annotations[MigrationActivationAnnotation]; strings.ToLower(a) {
	case "", "rarp":
	case "none":
		noActivation = true
	default:
		notes = append(notes, fmt.Sprintf("%s %s/%s: metadata.annotations[%s] %q is neither rarp nor none: rarp", KindVMI, ns, vmi.Name, MigrationActivationAnnotation, a))
	}
	for _, net := range vmi.Spec.Networks {
		if net.Multus == nil || net.Multus.NetworkName == "" {
			continue
		}
		netNS, netName := ns, net.Multus.NetworkName
		if i := strings.IndexByte(netName, '/'); i >= 0 {
			netNS, netName = netName[:i], netName[i+1:]
		}
		v := translator.VMInterface{
			Namespace:            ns,
			VMI:                  vmi.Name,
			Interface:            net.Name,
			Network:              netName,
			NetworkNamespace:     netNS,
			Node:                 node,
			MigrationTarget:      target,
			MigrationUID:         uid,
			MigrationTargetField: targetField(&vmi.Status, target),
			NoActivation:         noActivation,
			SecurityGroups:       groups,
		}
		var statusMAC, statusIP string
		var statusIPs []string
		if idx := slices.IndexFunc(vmi.Status.Interfaces, func(i VMIInterfaceStatus) bool { return i.Name == net.Name }); idx >= 0 {
			st := vmi.Status.Interfaces[idx]
			statusIPs = append([]string{st.IPAddress}, st.IPAddresses...)
			statusMAC, statusIP = st.MAC, statusAddress(statusIPs)
			v.IPv6 = statusIPv6(statusIPs)
		}
		v.MAC, v.IP = statusMAC, statusIP
		if idx := slices.IndexFunc(vmi.Spec.Domain.Devices.Interfaces, func(i VMIInterface) bool { return i.Name == net.Name }); idx >= 0 {
			if mac := vmi.Spec.Domain.Devices.Interfaces[idx].MACAddress; mac != "" {
				v.MAC, v.StatusMAC = mac, statusMAC
				v.MACField = "spec.domain.devices.interfaces[" + net.Name + "].macAddress"
			}
		}
		if idx := slices.IndexFunc(declared, func(a InterfaceAddress) bool { return a.Network == netName }); idx >= 0 && declared[idx].IPAddress != "" {
			v.IP, v.StatusIP = declared[idx].IPAddress, statusIP
			if slices.Contains(statusIPs, v.IP) {
				v.StatusIP = v.IP // status lists it, among others
			}
			v.IPField = "metadata.annotations[" + InterfacesAnnotation + "][" + netName + "].ipAddress"
		}
		if idx := slices.IndexFunc(declared, func(a InterfaceAddress) bool { return a.Network == netName }); idx >= 0 && declared[idx].IPv6Address != "" {
			// The declared address, with the link-local ones status
			// reports (port security lets them through).
			v6 := []string{strings.TrimSpace(declared[idx].IPv6Address)}
			for _, s := range strings.Split(v.IPv6, ",") {
				if a, err := netip.ParseAddr(s); err == nil && a.IsLinkLocalUnicast() {
					v6 = append(v6, s)
				}
			}
			v.IPv6 = strings.Join(v6, ",")
			v.IPv6Field = "metadata.annotations[" + InterfacesAnnotation + "][" + netName + "].ipv6Address"
		}
		// Without an IPv4 address the interface is passed on: a port on
		// an IPv6-only network needs none (its SLAAC address follows from
		// the MAC), and the planner leaves out one on a network with a
		// cidr until it has one.
		if v.MAC == "" {
			notes = append(notes, fmt.Sprintf("%s %s/%s interface %s: no MAC yet (neither declared nor in status), no port", KindVMI, ns, vmi.Name, net.Name))
			continue
		}
		out = append(out, v)
	}
	return out, notes
}

// targetField is where a VMI's migration target was read, "" for its
// status.migrationState.targetNode.
func targetField(st *VirtualMachineInstanceStatus, target string) string {
	if target == "" || st.MigrationState == nil {
		return ""
	}
	return st.MigrationState.TargetField
}

// migrationNodes reads a VMI's node and the live migration moving it, if
// one runs (KubeVirt keeps the last migration's state after it ended):
// while it runs, node is its source and target its target; once it
// completed, node is the target (status.nodeName follows); once it failed
// or its abort succeeded, the source. A target that is the source moves
// nothing.
func migrationNodes(st *VirtualMachineInstanceStatus) (node, target, uid string) {
	node = st.NodeName
	ms := st.MigrationState
	if ms == nil || ms.TargetNode == "" {
		return node, "", ""
	}
	source := ms.SourceNode
	if source == "" {
		source = node
	}
	switch {
	case ms.Failed || ms.AbortStatus == "Succeeded":
		if node == "" {
			node = source
		}
		return node, "", ""
	case ms.Completed:
		return ms.TargetNode, "", ""
	case ms.TargetNode == source:
		return node, "", ""
	}
	return source, ms.TargetNode, ms.MigrationUID
}

// statusAddress is the address of an interface's status (ipAddress, then
// ipAddresses): its first IPv4 address that is not link-local. The guest
// agent also reports the IPv6 and link-local addresses a guest has before
// DHCP gave it the network's address (ONOS never read the status): such
// an address is neither the port's nor a contradiction of the declared
// one, which would leave the VM without the port DHCP needs.
func statusAddress(ips []string) string {
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() && !a.IsLinkLocalUnicast() {
			return s
		}
	}
	return ""
}

// statusIPv6 are the IPv6 addresses of an interface's status, sorted,
// each once, comma-joined (translator.VMInterface.IPv6).
func statusIPv6(ips []string) string {
	var out []string
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Is6() && !a.Is4In6() {
			out = append(out, a.WithZone("").String())
		}
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ",")
}

func (s *Set) addFloatingIP(where string, raw json.RawMessage) error {
	var fip FloatingIP
	if err := json.Unmarshal(raw, &fip); err != nil {
		return decodeErr(where, KindFloatingIP, fip.Name, err)
	}
	return s.applyFloatingIP(where, &fip)
}

// applyFloatingIP adds a floating IP. One without a name or a router fails
// the load: nothing says whose status and rows it is. A missing id,
// networkName or floatingIp is the floating IP's own error, which the plan
// reports in its status (translator.FloatingIPStatus) without failing its
// router.
func (s *Set) applyFloatingIP(where string, obj *FloatingIP) error {
	f, err := FloatingIPFrom(obj)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	s.Objects.FloatingIPs = append(s.Objects.FloatingIPs, f)
	return nil
}

// FloatingIPFrom converts a floating IP object to the translator's input.
// Its error names the object and the field: metadata.name and
// spec.routerName are required to tell whose it is. The other required
// fields (spec.id, spec.networkName, spec.floatingIp) are checked when
// planning, as the floating IP's own error.
func FloatingIPFrom(obj *FloatingIP) (translator.FloatingIP, error) {
	switch {
	case obj.Name == "":
		return translator.FloatingIP{}, &translator.InputError{Kind: translator.ObjFloatingIP, Object: "(unnamed)", Field: "metadata.name", Msg: "is empty"}
	case obj.Spec.RouterName == "":
		return translator.FloatingIP{}, &translator.InputError{Kind: translator.ObjFloatingIP, Object: obj.Name, Field: "spec.routerName", Msg: "is required"}
	}
	return translator.FloatingIP{
		Name:       obj.Name,
		ID:         obj.Spec.ID,
		Router:     obj.Spec.RouterName,
		Network:    obj.Spec.NetworkName,
		IP:         obj.Spec.FloatingIP,
		FixedIP:    obj.Spec.FixedIP,
		VMName:     obj.Spec.VMName,
		PodName:    obj.Spec.PodName,
		Created:    obj.CreationTimestamp.Time,
		Generation: obj.Generation,
	}, nil
}

// LoadBalancer is the kubevirt.io/v1 load balancer object (plural
// loadbalancers, cluster-scoped).
type LoadBalancer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              LoadBalancerSpec `json:"spec"`
}

// LoadBalancerSpec is the load balancer as ONOS kubevirt-networking
// accepted it: name, networkId and vip required.
type LoadBalancerSpec struct {
	Name        string             `json:"name,omitempty"`
	Description string             `json:"description,omitempty"`
	NetworkID   string             `json:"networkId,omitempty"`
	VIP         string             `json:"vip,omitempty"`
	Members     []string           `json:"members,omitempty"`
	Rules       []LoadBalancerRule `json:"rules,omitempty"`
	// HealthCheck is a kubevirt-ovn extension: ONOS had no health
	// checks.
	HealthCheck *LoadBalancerHealthCheck `json:"healthCheck,omitempty"`
}

// LoadBalancerHealthCheck is spec.healthCheck; numbers as numbers or
// strings.
type LoadBalancerHealthCheck struct {
	SourceIP     string     `json:"sourceIp,omitempty"`
	Interval     flexString `json:"interval,omitempty"`
	Timeout      flexString `json:"timeout,omitempty"`
	SuccessCount flexString `json:"successCount,omitempty"`
	FailureCount flexString `json:"failureCount,omitempty"`
}

// LoadBalancerRule is an entry of spec.rules; ports as numbers or
// strings.
type LoadBalancerRule struct {
	Protocol     string     `json:"protocol,omitempty"`
	PortRangeMin flexString `json:"portRangeMin,omitempty"`
	PortRangeMax flexString `json:"portRangeMax,omitempty"`
}

func (s *Set) addLoadBalancer(where string, raw json.RawMessage) error {
	var lb LoadBalancer
	if err := json.Unmarshal(raw, &lb); err != nil {
		return decodeErr(where, KindLoadBalancer, lb.Name, err)
	}
	l, err := LoadBalancerFrom(&lb)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	s.Objects.LoadBalancers = append(s.Objects.LoadBalancers, l)
	return nil
}

// LoadBalancerFrom converts a load balancer object to the translator's
// input. Its error names the object and the field: metadata.name and
// spec.networkId are required to tell whose it is, and a port must be a
// number. The other fields are checked when planning, as the load
// balancer's own error.
func LoadBalancerFrom(obj *LoadBalancer) (translator.LoadBalancer, error) {
	bad := func(field, msg string) (translator.LoadBalancer, error) {
		name := obj.Name
		if name == "" {
			name = "(unnamed)"
		}
		return translator.LoadBalancer{}, &translator.InputError{Kind: translator.ObjLoadBalancer, Object: name, Field: field, Msg: msg}
	}
	switch {
	case obj.Name == "":
		return bad("metadata.name", "is empty")
	case obj.Spec.NetworkID == "":
		return bad("spec.networkId", "is required")
	}
	lb := translator.LoadBalancer{
		Name:        obj.Name,
		ID:          obj.Spec.Name,
		Description: obj.Spec.Description,
		Network:     obj.Spec.NetworkID,
		VIP:         obj.Spec.VIP,
		Members:     slices.Clone(obj.Spec.Members),
		Created:     obj.CreationTimestamp.Time,
		Generation:  obj.Generation,
	}
	for i, r := range obj.Spec.Rules {
		rule := translator.LBRule{Protocol: r.Protocol}
		for _, p := range []struct {
			field string
			v     flexString
			into  *int
		}{{"portRangeMin", r.PortRangeMin, &rule.PortMin}, {"portRangeMax", r.PortRangeMax, &rule.PortMax}} {
			if p.v == "" {
				continue
			}
			n, err := strconv.Atoi(string(p.v))
			if err != nil {
				return bad(fmt.Sprintf("spec.rules[%d].%s", i, p.field), fmt.Sprintf("%q is not a number", string(p.v)))
			}
			*p.into = n
		}
		lb.Rules = append(lb.Rules, rule)
	}
	if h := obj.Spec.HealthCheck; h != nil {
		hc := &translator.LBHealthCheck{SourceIP: h.SourceIP}
		for _, p := range []struct {
			field string
			v     flexString
			into  *int
		}{{"interval", h.Interval, &hc.Interval}, {"timeout", h.Timeout, &hc.Timeout},
			{"successCount", h.SuccessCount, &hc.SuccessCount}, {"failureCount", h.FailureCount, &hc.FailureCount}} {
			if p.v == "" {
				continue
			}
			n, err := strconv.Atoi(string(p.v))
			if err != nil {
				return bad("spec.healthCheck."+p.field, fmt.Sprintf("%q is not a number", string(p.v)))
			}
			*p.into = n
		}
		lb.HealthCheck = hc
	}
	return lb, nil
}
