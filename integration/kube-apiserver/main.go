// Command kube-apiserver is Kubernetes' API server, built from the
// k8s.io/kubernetes module of the client-go release kubevirt-ovn uses, for
// the tests that need what the apiextensions test server does not serve:
// pods (a live migration's target pod) and Events. Its own module keeps
// k8s.io/kubernetes out of kubevirt-ovn's.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
