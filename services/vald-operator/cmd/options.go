package main

import (
	"errors"
	"flag"
	"strconv"

	"github.com/opsuite/suite/services/vald-operator/internal/controller"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	"github.com/opsuite/suite/shared/envflag"
)

// operatorFlags registers the operator's own flags on fs. Each flag's default comes from an
// environment variable (named in its help) when that is set, else from the built-in
// default; a malformed variable is reported by the returned validate function.
func operatorFlags(fs *flag.FlagSet, o *controller.Options, pprofAddr *string, getenv func(string) string) (validate func() error) {
	env := envflag.New(fs, getenv)
	env.String(pprofAddr, "pprof-bind-address", "PPROF_BIND_ADDRESS",
		"Address of the Go profiler's /debug/pprof endpoints (CPU, heap, block, mutex); empty turns them off. Unauthenticated: bind it to localhost ($PPROF_BIND_ADDRESS).")
	b := &o.Build
	env.Duration(&o.RequeueAfter, "requeue-after", "REQUEUE_AFTER",
		"How long a Pending or Progressing release waits before it is checked again ($REQUEUE_AFTER).")
	env.Int(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", "MAX_CONCURRENT_RECONCILES",
		"Releases reconciled at once ($MAX_CONCURRENT_RECONCILES).")
	env.Duration(&o.CRDPollInterval, "crd-poll-interval", "CRD_POLL_INTERVAL",
		"How often the operator checks whether the ValdRelease CRD is installed, until it is ($CRD_POLL_INTERVAL).")
	env.Bool(&o.RequireNodePoolMatch, "require-nodepool-match", "REQUIRE_NODEPOOL_MATCH",
		"Generate ValdReleases only for infrastructure entries whose node pools have Nodes labelled <prefix>/namespace=<namespace> and <prefix>/type=general|agent ($REQUIRE_NODEPOOL_MATCH).")
	env.Bool(&o.RequireDeployed, "require-deployed", "REQUIRE_DEPLOYED",
		"WaitingCreateVrs succeeds only once the Vald Helm Operator reports every ValdRelease Deployed; false accepts a ValdRelease that exists with the current generation ($REQUIRE_DEPLOYED).")
	env.Duration(&o.HelmStatusWait, "helm-status-wait", "HELM_STATUS_WAIT",
		"How long a ValdRelease may go without any status from the Vald Helm Operator before the release's condition asks whether that operator runs ($HELM_STATUS_WAIT).")
	env.Duration(&o.NodePoolLossGrace, "nodepool-loss-grace", "NODEPOOL_LOSS_GRACE",
		"How long the ValdReleases of an infrastructure entry whose node-pool match was lost are kept before they are pruned; 0 prunes at once ($NODEPOOL_LOSS_GRACE).")
	env.String(&b.NodePoolLabelPrefix, "nodepool-label-prefix", "NODEPOOL_LABEL_PREFIX",
		"Prefix of the node-pool label keys; empty means the bare keys namespace and type ($NODEPOOL_LABEL_PREFIX).")
	env.String(&b.DefaultStorageClass, "default-storage-class", "DEFAULT_STORAGE_CLASS",
		"Storage class of agent volumes when a release names none; empty uses the cluster default ($DEFAULT_STORAGE_CLASS).")
	env.String(&b.DefaultAccessMode, "default-access-mode", "DEFAULT_ACCESS_MODE",
		"Access mode of agent volumes when a release names none ($DEFAULT_ACCESS_MODE).")
	env.Float(&b.PVMemoryRatio, "pv-memory-ratio", "PV_MEMORY_RATIO",
		"Agent volume size as a multiple of the agent node's memory, rounded up to GiB ($PV_MEMORY_RATIO).")
	env.Quantity(&b.PVMinSize, "pv-min-size", "PV_MIN_SIZE", "Smallest agent volume, and the size when the pool gives no memory ($PV_MIN_SIZE).")
	env.Quantity(&b.PVMaxSize, "pv-max-size", "PV_MAX_SIZE", "Largest agent volume; 0 means no cap ($PV_MAX_SIZE).")
	env.Float(&b.AgentResourceFraction, "agent-resource-fraction", "AGENT_RESOURCE_FRACTION",
		"Share of an agent node's CPU and memory an agent requests ($AGENT_RESOURCE_FRACTION).")
	env.String(&b.GatewayServiceType, "gateway-service-type", "GATEWAY_SERVICE_TYPE",
		"Gateway Service type when a release names none: ClusterIP, NodePort or LoadBalancer ($GATEWAY_SERVICE_TYPE).")
	env.String(&b.IngressDomain, "ingress-domain", "INGRESS_DOMAIN",
		"Domain of an enabled ingress without a host: <cluster name>.<domain> ($INGRESS_DOMAIN).")
	env.String(&b.DiscovererKind, "discoverer-kind", "DISCOVERER_KIND",
		"Discoverer workload when a release names none: DaemonSet or Deployment ($DISCOVERER_KIND).")
	env.IntOrString(&b.DiscovererMaxUnavailable, "discoverer-max-unavailable", "DISCOVERER_MAX_UNAVAILABLE",
		"Rolling-update maxUnavailable of a DaemonSet discoverer (the Vald chart's discoverer.rollingUpdate.maxUnavailable), a number or a percentage ($DISCOVERER_MAX_UNAVAILABLE).")
	env.String(&b.DiscovererPDBMaxUnavailable, "discoverer-pdb-max-unavailable", "DISCOVERER_PDB_MAX_UNAVAILABLE",
		"maxUnavailable of the discoverer's PodDisruptionBudget (the Vald chart's discoverer.maxUnavailable), a number or a percentage; empty keeps the chart's default ($DISCOVERER_PDB_MAX_UNAVAILABLE).")
	env.Int(&b.GatewayAgentsPerReplica, "gateway-agents-per-replica", "GATEWAY_AGENTS_PER_REPLICA",
		"Agents one gateway replica serves: the gateway's minReplicas is ceil(agents / this), its maxReplicas one per agent, both within --gateway-min-replicas and --gateway-max-replicas, unless a release sets them ($GATEWAY_AGENTS_PER_REPLICA).")
	env.Int(&b.GatewayMinReplicas, "gateway-min-replicas", "GATEWAY_MIN_REPLICAS",
		"Lower bound of the derived gateway replicas ($GATEWAY_MIN_REPLICAS).")
	env.Int(&b.GatewayMaxReplicas, "gateway-max-replicas", "GATEWAY_MAX_REPLICAS",
		"Upper bound of the derived gateway replicas ($GATEWAY_MAX_REPLICAS).")
	var annotations, defaults string
	env.String(&annotations, "gateway-ingress-annotations", "GATEWAY_INGRESS_ANNOTATIONS",
		"Annotations of every enabled gateway ingress, a JSON or YAML object of strings; a release's ingress.annotations win key by key ($GATEWAY_INGRESS_ANNOTATIONS).")
	env.String(&defaults, "default-valdrelease-values", "DEFAULT_VALDRELEASE_VALUES",
		"Cluster-wide ValdRelease template: a JSON or YAML object of Vald chart values every ValdRelease carries under what the operator generates and the release's overlay ($DEFAULT_VALDRELEASE_VALUES).")
	return func() error {
		var errs []error
		var err error
		if b.GatewayIngressAnnotations, err = resources.ParseAnnotations(annotations); err != nil {
			errs = append(errs, err)
		}
		if b.DefaultValues, err = resources.ParseDefaultValues(defaults); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(append(errs, env.Err(), o.Validate())...)
	}
}

// Client rate limits of this operator: each release costs three writes (two applies and a
// status write) and an event per phase, so the kit's 50 requests per second would make
// 1,000 releases wait a minute on the client alone; the API server's priority and fairness
// still protects it.
const (
	defaultAPIQPS   = 300
	defaultAPIBurst = 600
)

// apiRateDefaults raises the defaults of the kit's --kube-api-qps and --kube-api-burst,
// registered on fs before the operator's flags; a flag given on the command line still wins.
func apiRateDefaults(fs *flag.FlagSet) {
	for name, v := range map[string]int{"kube-api-qps": defaultAPIQPS, "kube-api-burst": defaultAPIBurst} {
		if f := fs.Lookup(name); f != nil {
			_ = f.Value.Set(strconv.Itoa(v)) // an int is always a valid float and int
			f.DefValue = strconv.Itoa(v)
		}
	}
}
