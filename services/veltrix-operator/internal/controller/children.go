package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/children"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

func set[O client.Object](p *pass, list func() client.ObjectList, allowEmpty bool) children.Set[O] {
	return children.Set[O]{
		// The cache holds Secrets and ConfigMaps with our label only (CacheByObject): a
		// child's name taken by an unlabelled object is seen through the API reader.
		Client: p.ctl.client, Live: p.ctl.cfg.Reader, Applier: p.ctl.apply, Owner: p.c, NewList: list,
		Selector: resources.Labels(p.c), AllowEmpty: allowEmpty,
	}
}

// namespacedChildren writes the ServiceAccount, the Services, the admin token Secret, the
// ConfigMap and the ServiceMonitor. It returns false when one failed (the cause is in
// the conditions).
func (p *pass) namespacedChildren(ctx context.Context) bool {
	c := p.c
	fail := func(what string, err error) bool {
		var nc *children.NotControlledError
		if errors.As(err, &nc) {
			p.childrenErr = fmt.Sprintf("%s %s exists and is not this cluster's: delete or rename it", nc.Kind, nc.Key.Name)
		} else {
			p.childrenErr = fmt.Sprintf("writing the %s failed", what)
		}
		return false
	}
	if _, err := set[*corev1.ServiceAccount](p, func() client.ObjectList { return &corev1.ServiceAccountList{} }, false).
		Sync(ctx, []*corev1.ServiceAccount{resources.ServiceAccount(c)}); err != nil {
		return fail("ServiceAccount", err)
	}
	if _, err := set[*corev1.Service](p, func() client.ObjectList { return &corev1.ServiceList{} }, false).
		Sync(ctx, []*corev1.Service{resources.HeadlessService(c), resources.ClientService(c)}); err != nil {
		return fail("Services", err)
	}
	token, err := p.adminToken(ctx)
	if err != nil {
		return fail("admin token Secret", err)
	}
	if token == "" {
		return false // tokenMissing says why
	}
	p.admin = p.ctl.cfg.Admin(token)
	if _, err := set[*corev1.ConfigMap](p, func() client.ObjectList { return &corev1.ConfigMapList{} }, false).
		Sync(ctx, []*corev1.ConfigMap{resources.ConfigMap(c, p.engineEnv(ctx))}); err != nil {
		return fail("ConfigMap", err)
	}
	p.serviceMonitor(ctx)
	return true
}

// engineEnv is the engine's environment: the map index when a node the cluster uses has
// vm.max_map_count too low and the spec allows the fallback. Which nodes are low is the
// agents' answer: while no node's agent answers (an agent outage, or every agent pod
// NotReady after the control plane restarted), the live ConfigMap's choice stands, for a
// guess would change the config hash on the pod template and roll every member twice
// (found by the e2e control-plane outage). Computed once per pass.
func (p *pass) engineEnv(ctx context.Context) map[string]string {
	if p.env != nil {
		return p.env
	}
	fallback := p.c.Spec.IndexMapFallback
	low, known := false, false
	if p.prepared != nil {
		for _, n := range p.prepared.Usable(fallback) {
			known = true
			low = low || n.MaxMapCountLow
		}
	}
	env := resources.EngineEnv(p.c, low && fallback)
	if fallback && !known {
		var live corev1.ConfigMap
		if err := p.ctl.cfg.Reader.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: resources.ConfigMapName(p.c)}, &live); err == nil {
			if v, ok := live.Data[resources.EnvIndex]; ok {
				env[resources.EnvIndex] = v
			} else {
				delete(env, resources.EnvIndex)
			}
		}
	}
	p.env = env
	return env
}

// adminToken returns the admin token: from the spec's Secret, or from the Secret the
// operator generated once (kept across passes; never rotated silently). "" with
// tokenMissing set when the spec's Secret lacks it.
func (p *pass) adminToken(ctx context.Context) (string, error) {
	c := p.c
	secrets := set[*corev1.Secret](p, func() client.ObjectList { return &corev1.SecretList{} }, true)
	if ref := c.Spec.AdminTokenSecret; ref != nil {
		// The generated Secret, if any, goes: the spec's token replaces it.
		if _, err := secrets.Sync(ctx, nil); err != nil {
			return "", err
		}
		var s corev1.Secret
		err := p.ctl.cfg.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}, &s)
		switch {
		case apierrors.IsNotFound(err):
			p.tokenMissing = fmt.Sprintf("Secret %s named by spec.adminTokenSecret does not exist: create it with key %s", ref.Name, ref.Key)
			return "", nil
		case err != nil:
			return "", err
		case len(s.Data[ref.Key]) == 0:
			p.tokenMissing = fmt.Sprintf("Secret %s has no key %s (spec.adminTokenSecret): add it", ref.Name, ref.Key)
			return "", nil
		}
		return string(s.Data[ref.Key]), nil
	}
	key := client.ObjectKey{Namespace: c.Namespace, Name: resources.GeneratedAdminTokenSecretName(c)}
	var live corev1.Secret
	err := p.ctl.client.Get(ctx, key, &live)
	if apierrors.IsNotFound(err) {
		// The cache holds only Secrets with our label. One whose label was removed by hand
		// still holds the token the pods run with: read it from the API server and adopt
		// it (the Sync below restores the labels), never generate a new one over it (every
		// admin call would then fail with 401).
		err = p.ctl.cfg.Reader.Get(ctx, key, &live)
	}
	token := ""
	switch {
	case err == nil:
		if owner := metav1.GetControllerOf(&live); owner == nil || owner.UID != c.UID {
			// Not ours: reported (ChildrenFailed and its event), never written over.
			return "", &children.NotControlledError{Kind: "Secret", Key: key, Controller: owner}
		}
		token = string(live.Data[resources.AdminTokenKey])
	case !apierrors.IsNotFound(err):
		return "", err
	}
	if token == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		token = base64.RawURLEncoding.EncodeToString(b)
	}
	if _, err := secrets.Sync(ctx, []*corev1.Secret{resources.AdminTokenSecret(c, token)}); err != nil {
		return "", err
	}
	return token, nil
}

// serviceMonitor writes the ServiceMonitor; a missing CRD is a condition, not a failure.
func (p *pass) serviceMonitor(ctx context.Context) {
	sms := set[*unstructured.Unstructured](p, func() client.ObjectList {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(resources.ServiceMonitorGVK.Group + "/" + resources.ServiceMonitorGVK.Version)
		l.SetKind(resources.ServiceMonitorGVK.Kind + "List")
		return l
	}, false)
	_, err := sms.Sync(ctx, []*unstructured.Unstructured{resources.ServiceMonitor(p.c)})
	p.serviceMonitorMissing = meta.IsNoMatchError(err)
	// Best-effort: scraping is not what makes the cluster serve, so a failure is
	// MetricsMonitored's alone, never Ready's.
	p.serviceMonitorFailed = err != nil && !p.serviceMonitorMissing
	if p.serviceMonitorFailed {
		log.FromContext(ctx).Info("Writing the ServiceMonitor failed", "serviceMonitor", p.c.Name, "error", err.Error())
	}
}

// statefulSet reads the live StatefulSet; nil when it does not exist yet.
func (p *pass) statefulSet(ctx context.Context) (*appsv1.StatefulSet, error) {
	var live appsv1.StatefulSet
	err := p.ctl.client.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: resources.StatefulSetName(p.c)}, &live)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading StatefulSet: %w", err)
	}
	return &live, nil
}

// writeStatefulSet applies the StatefulSet with the replicas membership decided.
func (p *pass) writeStatefulSet(ctx context.Context, replicas int32) error {
	want := resources.StatefulSet(p.c, replicas, resources.ConfigHash(p.engineEnv(ctx)))
	out, err := set[*appsv1.StatefulSet](p, func() client.ObjectList { return &appsv1.StatefulSetList{} }, false).
		Sync(ctx, []*appsv1.StatefulSet{want})
	if err != nil {
		var nc *children.NotControlledError
		if errors.As(err, &nc) {
			p.childrenErr = fmt.Sprintf("StatefulSet %s exists and is not this cluster's: delete or rename it", nc.Key.Name)
			return nil
		}
		return err
	}
	if len(out.Applied) > 0 {
		p.sts = out.Applied[0]
	}
	return nil
}
