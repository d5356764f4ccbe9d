package validation

import (
	"context"
	"strings"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCountLimits: every count has an upper bound the API server enforces with a message
// that names it; the bound itself is accepted. dataInstances 2000000000 was accepted and
// had the operator plan two billion members until it was OOM-killed.
func TestCountLimits(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "mgc-")
	type mgc = memgraphv1.MemgraphCluster
	cases := []struct {
		name   string
		mutate func(*mgc)
		want   string // "" accepts
	}{
		{name: "dataInstances at the limit", mutate: func(c *mgc) { c.Spec.DataInstances = memgraphv1.MaxDataInstances }},
		{name: "dataInstances above the limit", mutate: func(c *mgc) { c.Spec.DataInstances = memgraphv1.MaxDataInstances + 1 },
			want: "dataInstances must be at most 64"},
		{name: "two billion dataInstances", mutate: func(c *mgc) { c.Spec.DataInstances = 2000000000 },
			want: "dataInstances must be at most 64"},
		{name: "coordinators at the limit", mutate: func(c *mgc) { c.Spec.Coordinators = memgraphv1.MaxCoordinators }},
		{name: "coordinators above the limit", mutate: func(c *mgc) { c.Spec.Coordinators = memgraphv1.MaxCoordinators + 2 },
			want: "coordinators must be at most 9"},
		{name: "two billion and one coordinators", mutate: func(c *mgc) { c.Spec.Coordinators = 2000000001 },
			want: "coordinators must be at most 9"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			verdict(t, env.Client.Create(context.Background(), edited(ns, tc.mutate)), tc.want)
		})
	}
}

// TestNameLimits: metadata.name is at most MaxNameLength characters and a DNS-1035 label,
// since it names the client Service and the longest derived name,
// <name>-coordinator-<revision hash>, labels every coordinator pod.
func TestNameLimits(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "mgc-")
	named := func(name string) *memgraphv1.MemgraphCluster {
		c := minimal(ns)
		c.Name = name
		return c
	}
	longest := "m" + rand.String(memgraphv1.MaxNameLength-1)
	cases := []struct {
		name, metaName, want string
	}{
		{name: "longest name", metaName: longest},
		{name: "one character more", metaName: longest + "x",
			want: "metadata.name must be at most 40 characters: the StatefulSet <name>-coordinator labels its pods with controller-revision-hash <name>-coordinator-<hash of up to 10 characters>, which must fit in 63"},
		{name: "starts with a digit", metaName: "1" + rand.String(5),
			want: "metadata.name must start with a lowercase letter and hold only lowercase letters, digits and '-' (no '.')"},
		{name: "with a dot", metaName: "mg." + rand.String(5), want: "metadata.name must start with a lowercase letter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { verdict(t, env.Client.Create(context.Background(), named(tc.metaName)), tc.want) })
	}
	t.Run("longest cluster domain", func(t *testing.T) {
		c := minimal(ns)
		c.Spec.ClusterDomain = domainOf(memgraphv1.MaxClusterDomainLength)
		verdict(t, env.Client.Create(context.Background(), c), "")
	})
	t.Run("cluster domain one character longer", func(t *testing.T) {
		c := minimal(ns)
		c.Spec.ClusterDomain = domainOf(memgraphv1.MaxClusterDomainLength + 1)
		verdict(t, env.Client.Create(context.Background(), c),
			"clusterDomain must be at most 76 characters: the pods' addresses <pod>.<service>.<namespace>.svc.<clusterDomain> must stay within the 253 of a DNS name")
	})
}

// TestLongestNameFits: everything the operator builds for a cluster of the longest
// accepted name, in a namespace of the longest name, with the largest counts and the longest
// cluster domain, is accepted
// by the API server, with the StatefulSet controller's own children (revision, pods of
// the last ordinal, claims) and the pods' DNS names.
func TestLongestNameFits(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, strings.Repeat("n", 57))
	c := minimal(ns)
	c.Name = "m" + rand.String(memgraphv1.MaxNameLength-1)
	c.Spec.Coordinators, c.Spec.DataInstances = memgraphv1.MaxCoordinators, memgraphv1.MaxDataInstances
	c.Spec.ClusterDomain = domainOf(memgraphv1.MaxClusterDomainLength)
	if err := env.Client.Create(context.Background(), c); err != nil {
		t.Fatalf("the longest name is refused: %v", err)
	}
	counts := map[resources.Role]int32{resources.RoleCoordinator: c.Spec.Coordinators, resources.RoleData: c.Spec.DataInstances}
	objs := []client.Object{resources.ClientService(c)}
	for _, r := range []resources.Role{resources.RoleCoordinator, resources.RoleData} {
		sts := resources.StatefulSet(c, r, counts[r])
		objs = append(objs, sts, resources.HeadlessService(c, r), resources.PodDisruptionBudget(c, r))
		last := counts[r] - 1
		if r == resources.RoleCoordinator {
			last += resources.FirstCoordinatorOrdinal
		}
		objs = append(objs, testenv.StatefulSetChildren(sts, last)...)
		testenv.IsDNSName(t, "pod FQDN", resources.PodFQDN(c, r, last))
	}
	testenv.AcceptedAsIs(t, env.Client, objs...)
}

// TestNameRulesSpareStoredObjects: a cluster stored before the name rules, with a name
// they now refuse, can still be updated and lose its finalizer: the rules apply on create
// only, so upgrading the CRD strands no object.
func TestNameRulesSpareStoredObjects(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "mgc-")
	tooLong := func() *memgraphv1.MemgraphCluster {
		c := minimal(ns)
		c.Name = "m" + rand.String(memgraphv1.MaxNameLength)
		return c
	}
	c := tooLong()
	testenv.AdmittedBeforeNameRules(t, env.Client, "memgraphclusters.memgraph.com", c, tooLong())
	testenv.StillUpdatable(t, env.Client, c)
}

// domainOf is a valid DNS domain of exactly n characters (n >= 1): labels of 63 and the
// rest, joined by dots.
func domainOf(n int) string {
	var labels []string
	for n > 64 {
		labels = append(labels, strings.Repeat("d", 63))
		n -= 64
	}
	return strings.Join(append(labels, strings.Repeat("d", n)), ".")
}
