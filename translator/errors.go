package translator

import "fmt"

// Kinds of input object, as errors name them.
const (
	ObjVirtualRouter = "VirtualRouter"
	ObjNAD           = "NetworkAttachmentDefinition"
	ObjVMI           = "VirtualMachineInstance"
	ObjFloatingIP    = "FloatingIp"
	ObjSecurityGroup = "SecurityGroup"
	ObjSGRule        = "SecurityGroupRule"
	ObjLoadBalancer  = "LoadBalancer"
)

// InputError is bad input. It names the object and the field so that the
// user can act on it, e.g.
//
//	VirtualRouter edge-1: spec.external.ip 198.18.0.5 is outside network public-net (192.0.2.0/24)
type InputError struct {
	Kind   string // ObjVirtualRouter, ObjNAD, ObjVMI or ObjFloatingIP
	Object string // name, or namespace/name for namespaced objects
	Field  string // path of the field, e.g. spec.external.ip
	Msg    string
	// Reason, when set, says that the input is fine but the cluster cannot
	// serve it yet (ReasonNoGatewayCandidate); status shows it instead of
	// InvalidSpec.
	Reason string
}

// ReasonNoGatewayCandidate: no SB chassis can be the router's gateway.
const ReasonNoGatewayCandidate = "NoGatewayCandidate"

func (e *InputError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s %s: %s", e.Kind, e.Object, e.Msg)
	}
	return fmt.Sprintf("%s %s: %s %s", e.Kind, e.Object, e.Field, e.Msg)
}

func routerErr(r string, field, format string, args ...any) *InputError {
	return &InputError{Kind: ObjVirtualRouter, Object: r, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func networkErr(n *Network, field, format string, args ...any) *InputError {
	return &InputError{Kind: ObjNAD, Object: n.Namespace + "/" + n.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func vmErr(v *VMInterface, field, format string, args ...any) *InputError {
	return &InputError{Kind: ObjVMI, Object: v.Namespace + "/" + v.VMI, Field: field, Msg: fmt.Sprintf(format, args...)}
}
