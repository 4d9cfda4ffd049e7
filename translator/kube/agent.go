package kube

// AgentSource is a zone agent's input: the cluster's objects (Source),
// synced once they, the OVNZones and the OVNAllocations are listed and
// the zone's own chassis are among the OVNZones' (before that the agent
// would plan its zone without its chassis and remove rows that are
// needed).
type AgentSource struct {
	*Source
	store *Store
	zone  string
}

// NewAgentSource is zone's agent's input from source and store.
func NewAgentSource(source *Source, store *Store, zone string) AgentSource {
	return AgentSource{Source: source, store: store, zone: zone}
}

// HasSynced says whether the agent may plan its zone.
func (s AgentSource) HasSynced() bool {
	if !s.Source.HasSynced() || !s.store.HasSynced() {
		return false
	}
	for _, c := range s.store.Chassis() {
		if c.Zone == s.zone {
			return true
		}
	}
	return false
}
