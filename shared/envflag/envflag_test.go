package envflag

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type opts struct {
	s   string
	b   bool
	i   int
	f   float64
	d   time.Duration
	q   resource.Quantity
	ios intstr.IntOrString
}

func register(env map[string]string) (*flag.FlagSet, *Set, *opts) {
	o := &opts{s: "def", i: 4, f: 0.5, d: 30 * time.Second, q: resource.MustParse("1Gi"), ios: intstr.FromInt32(1)}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s := New(fs, func(k string) string { return env[k] })
	s.String(&o.s, "s", "S", "")
	s.Bool(&o.b, "b", "B", "")
	s.Int(&o.i, "i", "I", "")
	s.Float(&o.f, "f", "F", "")
	s.Duration(&o.d, "d", "D", "")
	s.Quantity(&o.q, "q", "Q", "")
	s.IntOrString(&o.ios, "ios", "IOS", "")
	return fs, s, o
}

func TestDefaultsWithoutEnvironment(t *testing.T) {
	fs, s, o := register(map[string]string{"S": ""}) // empty counts as unset
	if err := fs.Parse(nil); err != nil || s.Err() != nil {
		t.Fatal(err, s.Err())
	}
	if o.s != "def" || o.b || o.i != 4 || o.f != 0.5 || o.d != 30*time.Second || o.q.String() != "1Gi" || o.ios.String() != "1" {
		t.Errorf("defaults changed: %+v", o)
	}
	if got := fs.Lookup("q").DefValue; got != "1Gi" {
		t.Errorf("quantity default shown as %q", got)
	}
}

func TestEnvironmentThenFlags(t *testing.T) {
	env := map[string]string{"S": "env", "B": "true", "I": "7", "F": "2.5", "D": "5s", "Q": "5Gi", "IOS": "25%"}
	fs, s, o := register(env)
	if err := fs.Parse([]string{"--i=9", "--q=3Gi", "--ios=2"}); err != nil || s.Err() != nil {
		t.Fatal(err, s.Err())
	}
	if o.s != "env" || !o.b || o.i != 9 || o.f != 2.5 || o.d != 5*time.Second || o.q.String() != "3Gi" || o.ios.String() != "2" {
		t.Errorf("options %+v", o)
	}
	if got := fs.Lookup("d").DefValue; got != "5s" {
		t.Errorf("help shows default %q, want the environment's 5s", got)
	}
}

func TestMalformedVariablesAreAllReported(t *testing.T) {
	env := map[string]string{"B": "maybe", "I": "x", "F": "y", "D": "soon", "Q": "lots"}
	fs, s, o := register(env)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	err := s.Err()
	if err == nil {
		t.Fatal("malformed variables accepted")
	}
	for _, want := range []string{`$B="maybe" is not true or false`, `$I="x" is not an integer`, `$F="y" is not a number`,
		`$D="soon" is not a duration such as 30s`, `$Q="lots" is not a quantity such as 10Gi`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	if o.i != 4 || o.d != 30*time.Second || o.q.String() != "1Gi" {
		t.Errorf("a malformed variable replaced the default: %+v", o)
	}
	if err := fs.Parse([]string{"--q=lots"}); err == nil || !strings.Contains(err.Error(), "is not a quantity") {
		t.Errorf("bad --q accepted: %v", err)
	}
}
