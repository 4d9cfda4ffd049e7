// Package integration proves by packets, on a real OVN started on this
// machine (integration/sandbox), what ovn-controller does with the rows
// kubevirt-ovn writes: SNAT, floating IPs, DHCP, security groups, load
// balancers, IPv6, gateway failover, live migration and interconnect
// zones, beside ovn-kubernetes' own code. README.md in this folder says
// how to run it.
package integration
