// Module shared holds libraries that know no single product (conditions, status, apply,
// manager bootstrap, node-agent client, test control plane); every operator depends on it.
module github.com/opsuite/suite/shared

go 1.26.0

require (
	github.com/opsuite/suite/proto v0.0.0
	k8s.io/api v0.37.2
	k8s.io/apimachinery v0.37.2
	k8s.io/client-go v0.37.2
	sigs.k8s.io/controller-runtime v0.25.2
)

replace github.com/opsuite/suite/proto => ../proto
