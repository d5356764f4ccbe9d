package controller

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCheckBoltSecret: what makes spec.tls.bolt's Secret unusable, each with a stable
// message naming the key or the names to fix; a good Secret yields its ca.crt.
func TestCheckBoltSecret(t *testing.T) {
	c := &memgraphv1.MemgraphCluster{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "db"}}
	ca, other := testenv.NewCA(t, "ca"), testenv.NewCA(t, "other")
	pods := []string{"*.g-coordinators.db.svc.cluster.local", "*.g-data.db.svc.cluster.local"}
	good := func(ca *testenv.CA, hosts ...string) map[string][]byte {
		crt, key := ca.Issue(t, hosts...)
		return map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.PEM}
	}
	with := func(d map[string][]byte, k string, v []byte) map[string][]byte {
		d[k] = v
		return d
	}
	_, otherKey := ca.Issue(t, pods...)
	cases := []struct {
		name string
		data map[string][]byte
		want string // "" = usable
	}{
		{"good", good(ca, pods...), ""},
		{"every pod by name", good(ca, "g-coordinator-1.g-coordinators.db.svc.cluster.local", "g-coordinator-2.g-coordinators.db.svc.cluster.local",
			"g-coordinator-3.g-coordinators.db.svc.cluster.local", "g-data-0.g-data.db.svc.cluster.local", "g-data-1.g-data.db.svc.cluster.local"), ""},
		{"a data pod not named", good(ca, "*.g-coordinators.db.svc.cluster.local"), `such as "g-data-0.g-data.db.svc.cluster.local"`},
		{"no ca.crt", with(good(ca, pods...), "ca.crt", nil), `no non-empty key "ca.crt"`},
		{"no tls.key", with(good(ca, pods...), "tls.key", nil), `no non-empty key "tls.key"`},
		{"key of another certificate", with(good(ca, pods...), "tls.key", otherKey), "are not a PEM certificate and its private key"},
		{"ca.crt not PEM", with(good(ca, pods...), "ca.crt", []byte("x")), `"ca.crt" holds no PEM certificate`},
		{"another CA", with(good(other, pods...), "ca.crt", ca.PEM), "is not verified by"},
		{"not naming the pods", good(ca, "memgraph.example.com"), "*.g-coordinators.db.svc.cluster.local and *.g-data.db.svc.cluster.local"},
	}
	for _, tc := range cases {
		got, err := checkBoltSecret(c, "bolt", tc.data)
		var te tlsError
		switch {
		case tc.want == "" && (err != nil || !bytes.Equal(got.CA, tc.data["ca.crt"]) || len(got.Cert) == 0):
			t.Errorf("%s: %v, want ca.crt back", tc.name, err)
		case tc.want != "" && (!errors.As(err, &te) || !strings.Contains(te.msg, tc.want)):
			t.Errorf("%s: %v, want a tlsError containing %q", tc.name, err, tc.want)
		}
	}
}
