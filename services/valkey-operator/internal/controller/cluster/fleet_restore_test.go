package cluster_test

import (
	"context"
	"io"
	"strings"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/restore"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// start starts n's server as its pod would: when the pod template has the restore-rdb
// init container (a member of a cluster bootstrapped from a backup), the fleet runs it
// first, as a kubelet would, with the environment the template gives it (resolved from
// the restore Secret, every key optional) and the server's data directory. The fleet's
// servers run appendonly no, so the container's default target (dump.rdb) is theirs.
func (f *fleet) start(ctx context.Context, n *valkeyv1.ValkeyNode) *valkeytest.Server {
	f.t.Helper()
	tmpl := resources.NodeWorkload(n, resources.NodeOptions{HandoverImage: "valkey-operator:test"}).Template()
	var init *corev1.Container
	for i := range tmpl.Spec.InitContainers {
		if tmpl.Spec.InitContainers[i].Name == resources.RestoreContainer {
			init = &tmpl.Spec.InitContainers[i]
		}
	}
	if init == nil {
		return valkeytest.Start(f.t)
	}
	env := map[string]string{}
	for _, e := range init.Env {
		ref := e.ValueFrom.SecretKeyRef
		var sec corev1.Secret
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: ref.Name}, &sec); err != nil {
			if ref.Optional == nil || !*ref.Optional {
				f.t.Fatalf("init container %s: %v", init.Name, err)
			}
			continue
		}
		if v, ok := sec.Data[ref.Key]; ok {
			env[e.Name] = string(v)
		}
	}
	return valkeytest.StartPrepared(f.t, func(dir string) error {
		var args []string
		for _, a := range init.Command[2:] {
			switch {
			case strings.HasPrefix(a, "--data-dir="):
				args = append(args, "--data-dir="+dir)
			case strings.HasPrefix(a, "--config="):
				// The fleet's server config is valkeytest's command line.
			default:
				args = append(args, a)
			}
		}
		return restore.Run(ctx, args, func(k string) string { return env[k] }, io.Discard)
	})
}
