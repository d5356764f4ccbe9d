package controller_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/controller"
	"github.com/opsuite/suite/services/veltrix-operator/internal/disks"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAgentOutageKeepsTheEnvironment: with spec.indexMapFallback and every node's
// vm.max_map_count low, the members run with the map index. When no agent answers (as
// after a control-plane restart, every agent pod NotReady at once), the operator cannot
// tell which nodes are low: the ConfigMap and the pod template's config hash stay as they
// were, so no member restarts for an outage of the agents; after it, still the same.
// Before the fix the environment lost the map index for the outage, and every member was
// rolled twice (seen in the e2e control-plane outage).
func TestAgentOutageKeepsTheEnvironment(t *testing.T) {
	ctx := context.Background()
	f := startFleet(t, operatorTokens(t, "outage", true), 1<<30, []string{"node-a", "node-b"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx")
	agents := &outageAgents{inner: &sysctlAgents{countingAgents: f.calls, value: map[string]int64{"node-a": 65530, "node-b": 65530}}}
	startController(t, f, ns, func(cfg *controller.Config, _ ctrl.Manager) { cfg.Agents = agents })
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 2, 2
		c.Spec.IndexMapFallback = true
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
	})
	condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionTrue, veltrixv1.ReasonPrepared)
	var hash string
	read := func() (index, h string, err error) {
		var cm corev1.ConfigMap
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.ConfigMapName(c)}, &cm); err != nil {
			return "", "", err
		}
		var sts appsv1.StatefulSet
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.StatefulSetName(c)}, &sts); err != nil {
			return "", "", err
		}
		return cm.Data[resources.EnvIndex], sts.Spec.Template.Annotations[resources.AnnotationConfigHash], nil
	}
	testenv.Eventually(t, 60*time.Second, "the map index in the ConfigMap and a config hash on the pods", func() (bool, string) {
		index, h, err := read()
		hash = h
		return err == nil && index == resources.IndexMap && h != "", fmt.Sprintf("index %q hash %q err %v", index, h, err)
	})

	agents.down.Store(true)
	testenv.Eventually(t, 60*time.Second, "DisksPrepared=False while no agent answers", func() (bool, string) {
		var live veltrixv1.VeltrixCluster
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
			return false, err.Error()
		}
		for _, cond := range live.Status.Conditions {
			if cond.Type == veltrixv1.ConditionDisksPrepared {
				return cond.Status == metav1.ConditionFalse, cond.Reason + ": " + cond.Message
			}
		}
		return false, "no DisksPrepared"
	})
	// A few more passes with the agents down (Poll 0.5 s).
	for range 6 {
		index, h, err := read()
		if err != nil {
			t.Fatal(err)
		}
		if index != resources.IndexMap || h != hash {
			t.Fatalf("with no agent answering, VELTRIXDB_INDEX=%q and config hash %q; want %q and %q unchanged (the members would roll)", index, h, resources.IndexMap, hash)
		}
		time.Sleep(500 * time.Millisecond)
	}

	agents.down.Store(false)
	condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionTrue, veltrixv1.ReasonPrepared)
	if index, h, err := read(); err != nil || index != resources.IndexMap || h != hash {
		t.Errorf("after the agents came back: VELTRIXDB_INDEX=%q, config hash %q (err %v); want %q and %q", index, h, err, resources.IndexMap, hash)
	}
}

// outageAgents fails every call while down, as unreachable agents do.
type outageAgents struct {
	inner disks.Agents
	down  atomic.Bool
}

func (o *outageAgents) Node(name string) disks.Agent {
	if o.down.Load() {
		return downAgent{}
	}
	return o.inner.Node(name)
}

var errAgentDown = errors.New("rpc error: code = Unavailable desc = connection refused (test outage)")

type downAgent struct{}

func (downAgent) PrepareDisks(context.Context, *nodeagentv1.PrepareDisksRequest) (*nodeagentv1.PrepareDisksResponse, error) {
	return nil, errAgentDown
}

func (downAgent) ReleaseDisks(context.Context, *nodeagentv1.ReleaseDisksRequest) (*nodeagentv1.ReleaseDisksResponse, error) {
	return nil, errAgentDown
}

func (downAgent) EnsureSysctl(context.Context, *nodeagentv1.EnsureSysctlRequest) (*nodeagentv1.EnsureSysctlResponse, error) {
	return nil, errAgentDown
}

func (downAgent) GetNodeReport(context.Context, *nodeagentv1.GetNodeReportRequest) (*nodeagentv1.GetNodeReportResponse, error) {
	return nil, errAgentDown
}
