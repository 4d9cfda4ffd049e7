module github.com/kubevirt-ovn/kubevirt-ovn

go 1.24

tool github.com/ovn-kubernetes/libovsdb/cmd/modelgen

require github.com/ovn-kubernetes/libovsdb v0.8.1

require golang.org/x/text v0.22.0 // indirect
