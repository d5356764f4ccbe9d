package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/vald-operator/internal/controller"
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
		o.NodePoolLossGrace != 10*time.Minute || o.Build.DiscovererPDBMaxUnavailable != "" {
		t.Errorf("defaults %+v", o)
	}
}

func TestEnvironmentThenFlags(t *testing.T) {
	env := map[string]string{
		"REQUIRE_NODEPOOL_MATCH": "true", "NODEPOOL_LABEL_PREFIX": "pool.example.com",
		"DEFAULT_STORAGE_CLASS": "fast", "PV_MIN_SIZE": "5Gi", "REQUEUE_AFTER": "5s",
		"GATEWAY_SERVICE_TYPE": "LoadBalancer", "DISCOVERER_KIND": "DaemonSet", "DISCOVERER_MAX_UNAVAILABLE": "25%",
		"DISCOVERER_PDB_MAX_UNAVAILABLE": "1", "NODEPOOL_LOSS_GRACE": "1m", "CRD_POLL_INTERVAL": "3s",
	}
	o, err := parse(t, env, "--requeue-after=2s", "--pv-min-size=3Gi")
	if err != nil {
		t.Fatal(err)
	}
	b := o.Build
	if !o.RequireNodePoolMatch || b.NodePoolLabelPrefix != "pool.example.com" || b.DefaultStorageClass != "fast" ||
		o.RequeueAfter != 2*time.Second || b.PVMinSize.String() != "3Gi" || b.GatewayServiceType != "LoadBalancer" ||
		b.DiscovererKind != "DaemonSet" || b.DiscovererMaxUnavailable.String() != "25%" || b.DiscovererPDBMaxUnavailable != "1" ||
		o.NodePoolLossGrace != time.Minute || o.CRDPollInterval != 3*time.Second {
		t.Errorf("options %+v", o)
	}
}

func TestInvalid(t *testing.T) {
	env := map[string]string{"REQUIRE_NODEPOOL_MATCH": "maybe", "PV_MIN_SIZE": "lots", "NODEPOOL_LOSS_GRACE": "-1s", "HELM_STATUS_WAIT": "0s"}
	_, err := parse(t, env, "--requeue-after=0s", "--gateway-service-type=ExternalName")
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"$REQUIRE_NODEPOOL_MATCH", "$PV_MIN_SIZE", "requeue interval", "gateway service type", "node-pool loss grace", "helm status wait"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
