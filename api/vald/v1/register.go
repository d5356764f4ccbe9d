package v1

import "k8s.io/apimachinery/pkg/runtime"

func knownTypes() []runtime.Object {
	return []runtime.Object{
		&ValdOperatorRelease{}, &ValdOperatorReleaseList{},
		&ValdRelease{}, &ValdReleaseList{},
	}
}
