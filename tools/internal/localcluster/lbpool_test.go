package localcluster

import (
	"net/netip"
	"strings"
	"testing"
)

// TestLoadBalancerPool: every instance's load-balancer pool lies in 127.0.0.0/8 apart
// from the pod, Service and node addresses of every instance, so clusters side by side
// never hand out one address twice; a pool that overlaps them is refused.
func TestLoadBalancerPool(t *testing.T) {
	type owned struct {
		what   string
		prefix netip.Prefix
	}
	var all []owned
	for i := range 60 {
		o := InstanceOptions(t.TempDir(), i)
		if err := o.Validate(); err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		for what, c := range map[string]string{"pods": o.PodCIDR, "services": o.ServiceCIDR,
			"nodes": o.NodeIPPrefix + "0/24", "load balancers": o.LoadBalancerCIDR} {
			p, err := netip.ParsePrefix(c)
			if err != nil || !p.Addr().IsLoopback() {
				t.Fatalf("instance %d %s: %q outside 127.0.0.0/8 (%v)", i, what, c, err)
			}
			for _, other := range all {
				if other.prefix.Overlaps(p) {
					t.Errorf("instance %d %s %s overlaps %s %s", i, what, p, other.what, other.prefix)
				}
			}
			all = append(all, owned{what: what, prefix: p})
		}
	}

	o := InstanceOptions(t.TempDir(), 0)
	for _, tc := range []struct{ cidr, want string }{
		{"127.1.128.0/24", "overlaps 127.1.0.0/16"},
		{"127.2.0.0/15", "overlaps 127.2.0.0/16"},
		{"127.3.0.0/24", `node "kwok-general-0": IP 127.3.0.1 lies in the load-balancer CIDR`},
		{"10.0.0.0/24", "must lie in 127.0.0.0/8"},
		{"127.4.0.0/31", "hold 4 addresses or more"},
	} {
		o.LoadBalancerCIDR = tc.cidr
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("load-balancer CIDR %s: %v, want an error containing %q", tc.cidr, err, tc.want)
		}
	}
	o.LoadBalancerCIDR = ""
	if err := o.Validate(); err != nil {
		t.Errorf("no load-balancer pool: %v", err)
	}
}
