package manager

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFlagsFillOptions(t *testing.T) {
	o := NewOptions("demo-operator")
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	o.AddFlags(fs)
	err := fs.Parse([]string{"--metrics-bind-address=127.0.0.1:9090", "--leader-elect=false",
		"--namespaces=a, b,,c", "--log-level=2", "--log-format=text"})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("valid options rejected: %v", err)
	}
	if o.MetricsAddr != "127.0.0.1:9090" || o.LeaderElect || strings.Join(o.Namespaces, ",") != "a,b,c" {
		t.Fatalf("flags not applied: %+v", o)
	}
	if o.LeaderElectionID != "demo-operator.opsuite.io" {
		t.Fatalf("lease name = %q", o.LeaderElectionID)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	o := NewOptions("x")
	o.MetricsAddr = "nope"
	o.ProbeAddr = ":"
	o.LeaderElectionID = ""
	o.LogLevel = "loud"
	o.LogFormat = "xml"
	err := o.Validate()
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, want := range []string{"--metrics-bind-address", "--health-probe-bind-address", "--leader-election-id", "--log-level", "--log-format"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
	o = NewOptions("x")
	o.MetricsAddr = "0"
	if err := o.Validate(); err != nil {
		t.Fatalf("metrics off rejected: %v", err)
	}
}

func TestMetricsCertAndShutdownOptions(t *testing.T) {
	dir := t.TempDir()
	o := NewOptions("x")
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--metrics-cert-dir=" + dir, "--graceful-shutdown-timeout=5s"}); err != nil {
		t.Fatal(err)
	}
	err := o.Validate()
	if err == nil || strings.Count(err.Error(), "--metrics-cert-dir") != 2 || !strings.Contains(err.Error(), "tls.crt") || !strings.Contains(err.Error(), "tls.key") {
		t.Fatalf("missing certificate files not reported: %v", err)
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("certificate files present, still rejected: %v", err)
	}
	mo := metricsOptions(o)
	if mo.CertDir != dir || mo.CertName != "tls.crt" || mo.KeyName != "tls.key" || !mo.SecureServing {
		t.Errorf("metrics options %+v", mo)
	}
	if mo := metricsOptions(NewOptions("x")); mo.CertDir != "" || !mo.SecureServing {
		t.Errorf("default metrics options %+v: want the self-signed certificate", mo)
	}
	o.MetricsSecure = false
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "needs --metrics-secure") {
		t.Errorf("a certificate for plain HTTP accepted: %v", err)
	}
	o = NewOptions("x")
	o.GracefulShutdownTimeout = -time.Second
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--graceful-shutdown-timeout") {
		t.Errorf("negative shutdown timeout accepted: %v", err)
	}
}
