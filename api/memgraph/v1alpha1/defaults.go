package v1alpha1

// The schema defaults of MemgraphClusterSpec, mirrored so that builders given a spec that
// never passed admission (a unit test, an older stored object) fall back to the same
// values. A test in the operator's validation package pins each against the CRD.
const (
	DefaultCoordinators    int32 = 3
	DefaultDataInstances   int32 = 2
	DefaultImageRepository       = "memgraph/memgraph"
	DefaultImageTag              = "3.12.0"
	DefaultImagePullPolicy       = "IfNotPresent"
	DefaultLicenseKey            = "MEMGRAPH_ENTERPRISE_LICENSE"
	DefaultOrganizationKey       = "MEMGRAPH_ORGANIZATION_NAME"
	DefaultClusterDomain         = "cluster.local"
	DefaultAuthUserKey           = "USER"
	DefaultAuthPasswordKey       = "PASSWORD"

	DefaultBoltPort        int32 = 7687
	DefaultManagementPort  int32 = 10000
	DefaultCoordinatorPort int32 = 12000
	DefaultReplicationPort int32 = 20000
	DefaultMetricsPort     int32 = 9091

	DefaultLibPVCSize = "1Gi"
	DefaultLogPVCSize = "256Mi"
	DefaultAccessMode = AccessMode("ReadWriteOnce")
	DefaultRetention  = RetentionRetain
	// DefaultDataTerminationGracePeriodSeconds leaves a data instance time for its
	// snapshot on exit; DefaultCoordinatorTerminationGracePeriodSeconds is Kubernetes'.
	DefaultDataTerminationGracePeriodSeconds        int64 = 1800
	DefaultCoordinatorTerminationGracePeriodSeconds int64 = 30
	DefaultInitialState                                   = StateInitializing

	DefaultReplicationMode                       = ReplicationSync
	DefaultInstanceDownTimeoutSec          int32 = 5
	DefaultInstanceHealthCheckFrequencySec int32 = 1
	DefaultSyncFailoverOnly                      = true
)

// Bounds the CRD enforces (a test pins each against the CRD's rules). MaxNameLength is the
// longest metadata.name whose derived names all fit: <name>-coordinator-<10-character
// revision hash> is 23 characters longer than the name and must stay a 63-character label.
const (
	MaxCoordinators  int32 = 9
	MaxDataInstances int32 = 64
	MaxNameLength          = 40
	// MaxClusterDomainLength leaves the longest pod address within DNS's 253: the
	// coordinator pod (name + 14), its headless Service (name + 13), a 63-character
	// namespace, the dots and "svc" take 177.
	MaxClusterDomainLength = 76
)

// Default probe timings, per probe kind (the same for both roles, as in the HA chart).
var (
	DefaultLivenessProbe  = ProbeTimings{PeriodSeconds: 5, TimeoutSeconds: 10, FailureThreshold: 20}
	DefaultReadinessProbe = ProbeTimings{PeriodSeconds: 5, TimeoutSeconds: 10, FailureThreshold: 20}
	DefaultStartupProbe   = ProbeTimings{PeriodSeconds: 10, TimeoutSeconds: 10, FailureThreshold: 1440}
)

// ReservedEnv are the environment variables the operator sets on every pod; extraEnv
// cannot shadow them (the CRD refuses each, and a test pins that it does).
var ReservedEnv = []string{
	"MEMGRAPH_ENTERPRISE_LICENSE", "MEMGRAPH_ORGANIZATION_NAME", "MEMGRAPH_USER", "MEMGRAPH_PASSWORD",
	"MEMGRAPH_BOLT_PORT", "MEMGRAPH_MANAGEMENT_PORT", "MEMGRAPH_COORDINATOR_PORT",
	"MEMGRAPH_COORDINATOR_ID", "MEMGRAPH_COORDINATOR_HOSTNAME", "MEMGRAPH_HA_CLUSTER_INIT_QUERIES",
	"POD_NAME", "POD_NAMESPACE",
}

// ReservedFlags are the memgraph flags the operator sets from the spec; extraArgs cannot
// set them, with or without a value, with one dash or two.
var ReservedFlags = []string{
	"bolt-port", "management-port", "coordinator-port",
	"coordinator-id", "coordinator-hostname", "ha-cluster-init-queries",
	"license-key", "organization-name",
	"bolt-cert-file", "bolt-key-file",
}
