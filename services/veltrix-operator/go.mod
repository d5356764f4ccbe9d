// Module veltrix-operator is the veltrix-operator controller binary, released on its own.
module github.com/opsuite/suite/services/veltrix-operator

go 1.26.0

require (
	github.com/opsuite/suite/api v0.0.0
	github.com/opsuite/suite/shared v0.0.0
	k8s.io/api v0.37.2
	k8s.io/apimachinery v0.37.2
	k8s.io/client-go v0.37.2
	sigs.k8s.io/controller-runtime v0.25.2
)

replace (
	github.com/opsuite/suite/api => ../../api
	github.com/opsuite/suite/proto => ../../proto
	github.com/opsuite/suite/shared => ../../shared
)
