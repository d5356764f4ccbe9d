package node

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/children"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// peersPoll is how soon a node that announces its address but has yet to learn every
// member's looks again: gossip carries hostnames within a second or two, and until the
// node switches to hostnames it sends outside clients to pod IPs.
const peersPoll = 2 * time.Second

// external is what the node is to announce with spec.external, read before talking to
// the server: the address, or why there is none yet.
type external struct {
	on      bool
	addr    string
	port    int32
	pending string
}

// syncExternal applies the node's own Service (or deletes it without spec.external) and
// reads the address a client outside Kubernetes reaches the node at.
func (r *Reconciler) syncExternal(ctx context.Context, n *valkeyv1.ValkeyNode, pod *corev1.Pod) (external, error) {
	set := children.Set[*corev1.Service]{Client: r.client, Applier: r.applier, Owner: n, AllowEmpty: true,
		Selector: map[string]string{resources.LabelNode: n.Name, resources.LabelComponent: resources.ComponentExternal},
		NewList:  func() client.ObjectList { return &corev1.ServiceList{} }}
	want := resources.ExternalService(n)
	if want == nil {
		_, err := set.Sync(ctx, nil)
		return external{}, err
	}
	out, err := set.Sync(ctx, []*corev1.Service{want})
	if msg, ok := refusal(err); ok {
		// An annotation the API server refuses, a quota on load balancers: said in the
		// condition, tried again at the resync; the pod's status is still reported.
		return external{on: true, pending: "the API server refused its Service: " + msg}, nil
	}
	if err != nil {
		return external{}, err
	}
	svc := &corev1.Service{}
	if len(out.Applied) > 0 {
		svc = out.Applied[0]
	} else if err := r.client.Get(ctx, client.ObjectKeyFromObject(want), svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return external{}, fmt.Errorf("reading Service %s: %w", want.Name, err)
		}
		svc = nil
	}
	var host *corev1.Node
	if n.Spec.External.Mode == valkeyv1.ExternalModeNodePort && pod != nil && pod.Spec.NodeName != "" {
		host = &corev1.Node{}
		if err := r.client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, host); err != nil {
			if !apierrors.IsNotFound(err) {
				return external{}, fmt.Errorf("reading Kubernetes node %s: %w", pod.Spec.NodeName, err)
			}
			host = nil
		}
	}
	addr, port, why := resources.ExternalAddress(n.Spec.External.Mode, svc, host)
	return external{on: true, addr: addr, port: port, pending: why}, nil
}

// announce makes the server announce ext to clients, or withdraw what it announced when
// spec.external is gone. Each value is read first and set only when it differs, so a pass
// changes nothing on a server that holds it, and a restarted server (which lost what
// CONFIG SET did) gets it again.
//
// Order: the hostname first; the preferred endpoint type only once this node knows every
// member's hostname, since a node preferring hostnames sends a client to "?" for a member
// whose hostname it lacks. Clients following this node's MOVED and ASK, and its CLUSTER
// SLOTS and SHARDS, then get the announced addresses; CLUSTER NODES keeps the pod IPs and
// shows the hostname after a comma. The bus and replication never use the hostname.
func (r *Reconciler) announce(ctx context.Context, p *pass, conn valkey.NodeAdmin, ext external) {
	n := p.n
	const t = valkeyv1.NodeConditionExternalAddressAnnounced
	if !ext.on {
		if n.Status.ExternalAddress == "" && meta.FindStatusCondition(n.Status.Conditions, t) == nil {
			return
		}
		if err := withdraw(ctx, conn); err != nil {
			p.set(cond(t, false, valkeyv1.NodeReasonAnnounceFailed, "withdrawing the announced address failed: "+err.Error()))
			p.wait(r.cfg.RetryBase)
			return
		}
		n.Status.ExternalAddress = ""
		meta.RemoveStatusCondition(&n.Status.Conditions, t)
		log.FromContext(ctx).Info("Withdrew the announced external address", "valkeyNode", n.Name)
		return
	}
	if ext.pending != "" {
		n.Status.ExternalAddress = ""
		p.set(cond(t, false, valkeyv1.NodeReasonAddressPending, "no address to announce: "+ext.pending))
		p.wait(r.cfg.RequeueAfter)
		return
	}
	pairs := resources.AnnounceConfig(ext.addr, ext.port)
	for _, kv := range pairs {
		if kv[0] != resources.KeyAnnounceClientPort {
			continue
		}
		if _, ok, err := conn.ConfigGet(ctx, kv[0]); err == nil && !ok {
			n.Status.ExternalAddress = ""
			p.set(cond(t, false, valkeyv1.NodeReasonAnnounceUnsupported, fmt.Sprintf(
				"mode %s needs the server to announce port %d apart from its own %d, and this server has no %s (Valkey 8.0 and Redis 7.0 lack it): use networking.external mode LoadBalancer or a server that has it",
				n.Spec.External.Mode, ext.port, resources.ClientPort, resources.KeyAnnounceClientPort)))
			p.wait(r.cfg.RetryMax)
			return
		}
	}
	if err := setChanged(ctx, conn, pairs); err != nil {
		n.Status.ExternalAddress = ""
		p.set(cond(t, false, valkeyv1.NodeReasonAnnounceFailed, "announcing the external address failed: "+err.Error()))
		p.wait(r.cfg.RetryBase)
		return
	}
	n.Status.ExternalAddress = resources.JoinAddress(ext.addr, ext.port)

	view, err := conn.ClusterNodes(ctx)
	if err != nil {
		p.set(cond(t, false, valkeyv1.NodeReasonAnnounceFailed, "reading CLUSTER NODES failed: "+err.Error()))
		p.wait(r.cfg.RetryBase)
		return
	}
	if missing := withoutHostname(view); len(missing) > 0 {
		p.set(cond(t, false, valkeyv1.NodeReasonPeersPending, fmt.Sprintf(
			"announces %s; %d member(s) it knows announce no address yet, so it still sends clients to their IPs",
			n.Status.ExternalAddress, len(missing))))
		p.wait(peersPoll)
		return
	}
	if err := setChanged(ctx, conn, [][2]string{{resources.KeyPreferredEndpoint, "hostname"}}); err != nil {
		p.set(cond(t, false, valkeyv1.NodeReasonAnnounceFailed, "setting the preferred endpoint type failed: "+err.Error()))
		p.wait(r.cfg.RetryBase)
		return
	}
	p.set(cond(t, true, valkeyv1.NodeReasonAnnounced, fmt.Sprintf(
		"announces %s and sends clients to every member's announced address", n.Status.ExternalAddress)))
}

// withoutHostname lists the ids of the members (handshakes aside) the view shows no
// announced hostname for.
func withoutHostname(v valkey.View) []string {
	var out []string
	for _, m := range v.Nodes {
		if !m.Handshake && !m.NoAddr && m.Hostname == "" {
			out = append(out, m.ID)
		}
	}
	sort.Strings(out)
	return out
}

// setChanged CONFIG SETs, in one command, the pairs whose value on the server differs.
func setChanged(ctx context.Context, conn valkey.NodeAdmin, pairs [][2]string) error {
	var diff [][2]string
	for _, kv := range pairs {
		have, ok, err := conn.ConfigGet(ctx, kv[0])
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("the server has no config %s", kv[0])
		}
		if !strings.EqualFold(have, kv[1]) {
			diff = append(diff, kv)
		}
	}
	return conn.ConfigSet(ctx, diff)
}

// withdraw sends clients back to IPs and clears the announced hostname (and client port
// where the server has one).
func withdraw(ctx context.Context, conn valkey.NodeAdmin) error {
	_, clientPort, err := conn.ConfigGet(ctx, resources.KeyAnnounceClientPort)
	if err != nil {
		return err
	}
	return setChanged(ctx, conn, resources.WithdrawConfig(clientPort))
}
