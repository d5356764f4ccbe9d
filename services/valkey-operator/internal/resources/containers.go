package resources

// Names valkey-io/valkey-operator gives its own containers. Its samples address them by
// these names in spec.containers (the read-only root filesystem samples hand "server" a
// securityContext), so an entry under one of them is laid over our container of the same
// role instead of being added as a container of its own, which would have no image and
// make the API server refuse the workload.
const (
	upstreamServerContainer   = "server"
	upstreamExporterContainer = "metrics-exporter"
)

// ContainerFor is the name of the pod's container that a spec.containers entry named name
// is merged into: ours under upstream's names, else the name itself (an existing
// container of that name, or a new one).
func ContainerFor(name string) string {
	switch name {
	case upstreamServerContainer:
		return ServerContainer
	case upstreamExporterContainer:
		return ExporterContainer
	}
	return name
}
