package manager

import (
	"flag"
	"strings"
	"testing"
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
