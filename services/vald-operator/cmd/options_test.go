package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/vald-operator/internal/controller"
	"github.com/opsuite/suite/shared/manager"
)

func parse(t *testing.T, env map[string]string, args ...string) (controller.Options, error) {
	t.Helper()
	o := controller.DefaultOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var pprof string
	validate := operatorFlags(fs, &o, &pprof, func(k string) string { return env[k] })
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, validate()
}

func TestDefaults(t *testing.T) {
	o, err := parse(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.RequeueAfter != 30*time.Second || o.RequireNodePoolMatch || o.Build.NodePoolLabelPrefix != "" ||
		o.Build.DefaultAccessMode != "ReadWriteOnce" || o.Build.PVMinSize.String() != "1Gi" || o.Build.DiscovererKind != "Deployment" ||
		!o.RequireDeployed || o.HelmStatusWait != 2*time.Minute || o.CRDPollInterval != 10*time.Second ||
		o.NodePoolLossGrace != 10*time.Minute || o.Build.DiscovererPDBMaxUnavailable != "" || o.MaxConcurrentReconciles != 16 ||
		o.Build.GatewayAgentsPerReplica != 2 || o.Build.GatewayMinReplicas != 2 || o.Build.GatewayMaxReplicas != 100 ||
		o.Build.GatewayIngressAnnotations != nil || o.Build.DefaultValues != nil {
		t.Errorf("defaults %+v", o)
	}
}

func TestEnvironmentThenFlags(t *testing.T) {
	env := map[string]string{
		"REQUIRE_NODEPOOL_MATCH": "true", "NODEPOOL_LABEL_PREFIX": "pool.example.com",
		"DEFAULT_STORAGE_CLASS": "fast", "PV_MIN_SIZE": "5Gi", "REQUEUE_AFTER": "5s",
		"GATEWAY_SERVICE_TYPE": "LoadBalancer", "DISCOVERER_KIND": "DaemonSet", "DISCOVERER_MAX_UNAVAILABLE": "25%",
		"DISCOVERER_PDB_MAX_UNAVAILABLE": "1", "NODEPOOL_LOSS_GRACE": "1m", "CRD_POLL_INTERVAL": "3s",
		"GATEWAY_AGENTS_PER_REPLICA": "4", "GATEWAY_MIN_REPLICAS": "3", "GATEWAY_MAX_REPLICAS": "50",
		"GATEWAY_INGRESS_ANNOTATIONS": `{"nginx.ingress.kubernetes.io/backend-protocol": "GRPC"}`,
		"DEFAULT_VALDRELEASE_VALUES":  "defaults:\n  image: {tag: v1.8.0}\n",
	}
	o, err := parse(t, env, "--requeue-after=2s", "--pv-min-size=3Gi", "--gateway-max-replicas=40")
	if err != nil {
		t.Fatal(err)
	}
	b := o.Build
	if !o.RequireNodePoolMatch || b.NodePoolLabelPrefix != "pool.example.com" || b.DefaultStorageClass != "fast" ||
		o.RequeueAfter != 2*time.Second || b.PVMinSize.String() != "3Gi" || b.GatewayServiceType != "LoadBalancer" ||
		b.DiscovererKind != "DaemonSet" || b.DiscovererMaxUnavailable.String() != "25%" || b.DiscovererPDBMaxUnavailable != "1" ||
		o.NodePoolLossGrace != time.Minute || o.CRDPollInterval != 3*time.Second ||
		b.GatewayAgentsPerReplica != 4 || b.GatewayMinReplicas != 3 || b.GatewayMaxReplicas != 40 ||
		b.GatewayIngressAnnotations["nginx.ingress.kubernetes.io/backend-protocol"] != "GRPC" ||
		b.DefaultValues["defaults"].(map[string]any)["image"].(map[string]any)["tag"] != "v1.8.0" {
		t.Errorf("options %+v", o)
	}
}

func TestInvalid(t *testing.T) {
	env := map[string]string{"REQUIRE_NODEPOOL_MATCH": "maybe", "PV_MIN_SIZE": "lots", "NODEPOOL_LOSS_GRACE": "-1s", "HELM_STATUS_WAIT": "0s",
		"GATEWAY_MIN_REPLICAS": "few", "GATEWAY_INGRESS_ANNOTATIONS": "[a]", "DEFAULT_VALDRELEASE_VALUES": `{"agent": {"name": "x"}}`}
	_, err := parse(t, env, "--requeue-after=0s", "--gateway-service-type=ExternalName", "--gateway-max-replicas=20000")
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"$REQUIRE_NODEPOOL_MATCH", "$PV_MIN_SIZE", "requeue interval", "gateway service type", "node-pool loss grace", "helm status wait",
		"$GATEWAY_MIN_REPLICAS", "gateway ingress annotations must be an object of strings", "gateway replicas bounds 2..20000",
		"default ValdRelease values set agent.name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// TestAPIRateDefaults: the operator's client rate limits default to 300/600 (the kit's
// 50/100 held 1,000 releases back); a flag given still wins, and --help shows the default.
func TestAPIRateDefaults(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		qps, burst float64
	}{
		{nil, 300, 600},
		{[]string{"--kube-api-qps=20", "--kube-api-burst=40"}, 20, 40},
	} {
		o := manager.NewOptions(controller.Name)
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.AddFlags(fs)
		apiRateDefaults(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if o.QPS != tc.qps || float64(o.Burst) != tc.burst {
			t.Errorf("%v: QPS %v, burst %d; want %v, %v", tc.args, o.QPS, o.Burst, tc.qps, tc.burst)
		}
		if d := fs.Lookup("kube-api-qps").DefValue; d != "300" {
			t.Errorf("--kube-api-qps shows default %q", d)
		}
	}
}

// TestPprofFlag: the profiler is off unless asked for, by flag or environment.
func TestPprofFlag(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, ""},
		{map[string]string{"PPROF_BIND_ADDRESS": "127.0.0.1:6060"}, nil, "127.0.0.1:6060"},
		{nil, []string{"--pprof-bind-address=127.0.0.1:7070"}, "127.0.0.1:7070"},
	} {
		o := controller.DefaultOptions()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var pprof string
		validate := operatorFlags(fs, &o, &pprof, func(k string) string { return tc.env[k] })
		if err := fs.Parse(tc.args); err != nil || validate() != nil {
			t.Fatalf("%v %v: %v", tc.env, tc.args, err)
		}
		if pprof != tc.want {
			t.Errorf("%v %v: pprof address %q, want %q", tc.env, tc.args, pprof, tc.want)
		}
	}
}
