package node

import (
	"context"
	"strings"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestRefusedWritesAreConditionsAndEvents: a workload or claim the API server refuses is
// the node's Ready=False condition with the API server's message and one Warning event
// on the node, not only a line in the operator's log; fixed, the node goes on. And the
// spec.containers shape of upstream's read-only root filesystem sample (an entry named
// "server" with a securityContext) is a StatefulSet the API server accepts.
func TestRefusedWritesAreConditionsAndEvents(t *testing.T) {
	h := start(t)
	h.create(h.configMap(""))
	hardened := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](56849), RunAsGroup: ptr.To[int64](56849),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	h.create(h.node("c-0-0", func(n *valkeyv1.ValkeyNode) {
		n.Spec.Exporter = valkeyv1.ExporterSpec{Enabled: true}
		n.Spec.Containers = []corev1.Container{{Name: "server", SecurityContext: hardened}}
	}))
	// A new container without an image: the API server refuses the StatefulSet.
	h.create(h.node("c-0-1", func(n *valkeyv1.ValkeyNode) {
		n.Spec.Containers = []corev1.Container{{Name: "sidecar"}}
	}))
	// A class name the API server refuses in a claim.
	h.create(h.node("c-0-2", func(n *valkeyv1.ValkeyNode) {
		n.Spec.Persistence = &valkeyv1.PersistenceSpec{Size: resource.MustParse("1Gi"), StorageClassName: ptr.To("Not_A_Class"),
			ReclaimPolicy: valkeyv1.ReclaimDelete}
	}))

	sts := h.statefulSet("c-0-0")
	var names []string
	for _, c := range sts.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != resources.ServerContainer+","+resources.ExporterContainer {
		t.Errorf("containers %v", names)
	}
	if sc := sts.Spec.Template.Spec.Containers[0].SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("server securityContext %+v", sc)
	}
	h.waitConditions("c-0-0", "Ready=False/PodNotReady")

	got := h.waitConditions("c-0-1", "Ready=False/"+valkeyv1.NodeReasonWorkloadRefused)
	msg := condOf(got, valkeyv1.NodeConditionReady).Message
	if !strings.HasPrefix(msg, "the API server refused the workload: ") || !strings.Contains(msg, "containers[1].image: Required value") {
		t.Errorf("Ready message %q", msg)
	}
	got = h.waitConditions("c-0-2", "Ready=False/"+valkeyv1.NodeReasonPersistentVolumeClaimRefused+
		" PersistentVolumeClaimReady=False/"+valkeyv1.NodeReasonPersistentVolumeClaimRefused)
	if m := condOf(got, valkeyv1.NodeConditionReady).Message; !strings.HasPrefix(m, "the API server refused the data claim: ") || !strings.Contains(m, "Not_A_Class") {
		t.Errorf("Ready message %q", m)
	}
	if err := env.Client.Get(context.Background(), h.key("c-0-2"), &appsv1.StatefulSet{}); err == nil {
		t.Error("a StatefulSet was created without its claim")
	}

	// One Warning event each, on the node, though the controller retries every second.
	time.Sleep(3 * time.Second)
	for node, reason := range map[string]string{"c-0-1": valkeyv1.NodeReasonWorkloadRefused, "c-0-2": valkeyv1.NodeReasonPersistentVolumeClaimRefused} {
		evs := h.warnings(reason)
		if len(evs) != 1 || evs[0].Regarding.Name != node || evs[0].Regarding.Kind != "ValkeyNode" || evs[0].Series != nil {
			t.Errorf("%s: Warning events %s: %+v, want one about the node", node, reason, evs)
		} else if !strings.Contains(evs[0].Note, "refused") {
			t.Errorf("%s: event note %q", node, evs[0].Note)
		}
	}

	// Fixed, the node goes on: the StatefulSet is written.
	update(h, &valkeyv1.ValkeyNode{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "c-0-1"}}, func(n *valkeyv1.ValkeyNode) {
		n.Spec.Containers[0].Image = "busybox"
	})
	h.statefulSet("c-0-1")
	h.waitConditions("c-0-1", "Ready=False/PodNotReady")
	testenv.WaitFor(t, "c-0-2 still refused", func() bool {
		return condOf(h.getNode("c-0-2"), valkeyv1.NodeConditionReady).Reason == valkeyv1.NodeReasonPersistentVolumeClaimRefused
	})
}

// TestRefusedResizeIsAnEvent: a claim the API server does not let grow (its class does not
// allow expansion) was already the PersistentVolumeClaimSizeReady condition; it is now a
// Warning event of the condition's reason too, once, though the node is looked at every
// second.
func TestRefusedResizeIsAnEvent(t *testing.T) {
	h := start(t)
	fixed := storageClass(t, "fixed-"+h.ns, false)
	h.create(h.configMap(""))
	h.create(h.node("c-0-0", func(n *valkeyv1.ValkeyNode) {
		n.Spec.Persistence = &valkeyv1.PersistenceSpec{Size: resource.MustParse("1Gi"), StorageClassName: ptr.To(fixed),
			ReclaimPolicy: valkeyv1.ReclaimDelete}
	}))
	h.pvc("c-0-0-data")
	h.bind("c-0-0-data", "1Gi", nil)
	h.waitConditions("c-0-0", "Ready=False/PodNotReady PersistentVolumeClaimReady=True/PersistentVolumeClaimBound PersistentVolumeClaimSizeReady=True/PersistentVolumeClaimSizeSatisfied")
	update(h, &valkeyv1.ValkeyNode{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "c-0-0"}}, func(n *valkeyv1.ValkeyNode) {
		n.Spec.Persistence.Size = resource.MustParse("3Gi")
	})
	got := h.waitConditions("c-0-0", "Ready=False/PodNotReady PersistentVolumeClaimReady=True/PersistentVolumeClaimBound PersistentVolumeClaimSizeReady=False/"+
		valkeyv1.NodeReasonPersistentVolumeClaimResizeInfeasible)
	time.Sleep(3 * time.Second)
	evs := h.warnings(valkeyv1.NodeReasonPersistentVolumeClaimResizeInfeasible)
	if len(evs) != 1 || evs[0].Regarding.Name != "c-0-0" || evs[0].Note != condOf(got, valkeyv1.NodeConditionPersistentVolumeClaimSizeReady).Message {
		t.Errorf("Warning events %+v, want one about c-0-0 with the condition's message", evs)
	}
}
