package controller

import (
	"context"
	"fmt"
	"strings"

	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// A NodePort member's address is that of the Kubernetes node its pod runs on.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch

// externalFinding is what the external-access step found: the address clients outside
// Kubernetes reach each member at (by pod name), and the members still without one.
type externalFinding struct {
	addrs   map[string]string
	pending []string
}

// externalAddresses reads, for every member Service of spec.externalAccessConfig, the
// address it gives clients outside Kubernetes; applied are the Services this pass wrote,
// as the API server answered. A member without one yet (a load balancer still
// provisioning, a pod not scheduled) keeps its pod's DNS name as bolt_server until a
// later pass: the Service's status change starts one (the controller owns Services).
func (p *pass) externalAddresses(ctx context.Context, applied []*corev1.Service) error {
	c := p.c
	p.external = externalFinding{}
	if c.Spec.ExternalAccessConfig == nil {
		return nil
	}
	fresh := map[string]*corev1.Service{}
	for _, s := range applied {
		fresh[s.Name] = s
	}
	p.external.addrs = map[string]string{}
	for _, r := range roles {
		first, n := int32(0), *p.sts[r].Spec.Replicas
		if r == resources.RoleCoordinator {
			first = resources.FirstCoordinatorOrdinal
		}
		for ordinal := first; ordinal < first+n; ordinal++ {
			pod := resources.PodName(c.Name, r, ordinal)
			svc, err := p.externalService(ctx, fresh, resources.MemberExternalServiceName(c.Name, r, ordinal))
			if err != nil {
				return err
			}
			var host *corev1.Node
			if svc != nil && svc.Spec.Type == corev1.ServiceTypeNodePort {
				if host, err = p.nodeOf(ctx, pod); err != nil {
					return err
				}
			}
			addr, why := resources.ExternalAddress(svc, host)
			if addr == "" {
				p.external.pending = append(p.external.pending, pod+": "+why)
				continue
			}
			p.external.addrs[pod] = addr
		}
	}
	if len(p.external.pending) > 0 {
		log.FromContext(ctx).V(1).Info("Members without an external address yet", "memgraphCluster", c.Name,
			"pending", strings.Join(p.external.pending, "; "))
	}
	return nil
}

// externalService is the named Service, as this pass applied it or as the cache holds
// it; nil when it does not exist yet.
func (p *pass) externalService(ctx context.Context, fresh map[string]*corev1.Service, name string) (*corev1.Service, error) {
	if s, ok := fresh[name]; ok {
		return s, nil
	}
	s := &corev1.Service{}
	err := p.ctl.client.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: name}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading Service %s: %w", name, err)
	}
	return s, nil
}

// nodeOf is the Kubernetes node running pod; nil when the pod is not there or not
// scheduled yet.
func (p *pass) nodeOf(ctx context.Context, pod string) (*corev1.Node, error) {
	po := &corev1.Pod{}
	err := p.ctl.client.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: pod}, po)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading pod %s: %w", pod, err)
	case po.Spec.NodeName == "":
		return nil, nil
	}
	n := &corev1.Node{}
	err = p.ctl.client.Get(ctx, client.ObjectKey{Name: po.Spec.NodeName}, n)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading Kubernetes node %s: %w", po.Spec.NodeName, err)
	}
	return n, nil
}
