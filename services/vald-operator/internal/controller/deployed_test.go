package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestDeployment(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	vr := func(status string) *valdv1.ValdRelease {
		v := &valdv1.ValdRelease{ObjectMeta: metav1.ObjectMeta{Name: "ns-a", Namespace: "ns", Generation: 3, CreationTimestamp: metav1.NewTime(created)}}
		if status != "" {
			v.Status = &apiextensionsv1.JSON{Raw: []byte(status)}
		}
		return v
	}
	long := strings.Repeat("x", 400)
	cases := []struct {
		name   string
		status string
		after  time.Duration
		want   string
	}{
		{"no status yet", "", time.Minute, `Unknown/Pending: Waiting for the Vald Helm Operator to deploy ValdRelease "ns-a".`},
		{"no status after the wait", "", 2 * time.Minute, `Unknown/Pending: ValdRelease "ns-a" has no status from the Vald Helm Operator after 2m0s: is the Vald Helm Operator installed, and does it watch namespace "ns"?`},
		{"empty status after the wait", `{}`, 3 * time.Minute, `Unknown/Pending: ValdRelease "ns-a" has no status from the Vald Helm Operator after 2m0s: is the Vald Helm Operator installed, and does it watch namespace "ns"?`},
		{"initialized", `{"conditions":[{"type":"Initialized","status":"True"}]}`, time.Hour, `Unknown/Pending: Waiting for the Vald Helm Operator to deploy the current values of ValdRelease "ns-a".`},
		{"deployed", `{"conditions":[{"type":"Initialized","status":"True"},{"type":"Deployed","status":"True","reason":"InstallSuccessful"}]}`, 0, "True/Succeeded: "},
		{"deployed, older generation", `{"observedGeneration":2,"conditions":[{"type":"Deployed","status":"True","reason":"UpgradeSuccessful"}]}`, 0, `Unknown/Pending: Waiting for the Vald Helm Operator to deploy the current values of ValdRelease "ns-a".`},
		{"deployed, this generation", `{"observedGeneration":3,"conditions":[{"type":"Deployed","status":"True","reason":"UpgradeSuccessful"}]}`, 0, "True/Succeeded: "},
		{"release failed", `{"conditions":[{"type":"Deployed","status":"True"},{"type":"ReleaseFailed","status":"True","reason":"UpgradeError","message":"values don't meet the specifications of the schema"}]}`, 0,
			`False/Failed: The Vald Helm Operator failed to deploy ValdRelease "ns-a" (ReleaseFailed, UpgradeError): values don't meet the specifications of the schema`},
		{"release failed cleared", `{"conditions":[{"type":"Deployed","status":"True"},{"type":"ReleaseFailed","status":"False"}]}`, 0, "True/Succeeded: "},
		{"irreconcilable, long message", `{"conditions":[{"type":"Irreconcilable","status":"True","reason":"ReconcileError","message":"` + long + `"}]}`, 0,
			`False/Failed: The Vald Helm Operator cannot reconcile ValdRelease "ns-a" (Irreconcilable, ReconcileError): ` + long[:300] + "..."},
		{"not a helm status", `{"conditions":"yes"}`, 0, `Unknown/Pending: The status of ValdRelease "ns-a" is not what the Vald Helm Operator writes; waiting for it to deploy.`},
	}
	for _, tc := range cases {
		res := deployment(vr(tc.status), created.Add(tc.after), 2*time.Minute)
		if got := fmt.Sprintf("%s/%s: %s", res.Status, res.Reason, res.Message); got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.name, got, tc.want)
		}
	}
}

// setHelmStatus writes a ValdRelease's status as the Vald Helm Operator would.
func (h *harness) setHelmStatus(cluster, status string) {
	h.t.Helper()
	vr := &valdv1.ValdRelease{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: h.ns + "-" + cluster}}
	if err := env.Client.Status().Patch(context.Background(), vr, client.RawPatch(types.MergePatchType, []byte(`{"status":`+status+`}`))); err != nil {
		h.t.Fatal(err)
	}
}

// TestHelmOperatorStatus: WaitingCreateVrs succeeds only once the Vald Helm Operator
// reports every ValdRelease Deployed; its failures surface with the helm message, and a
// missing operator is named after the wait.
func TestHelmOperatorStatus(t *testing.T) {
	h := start(t, func(o *Options) { o.RequireDeployed, o.HelmStatusWait = true, 2*time.Second })
	h.create(h.release("vor", "a=1", "b=2"))
	const waiting = "WaitingCreateVrs 1/3 Pending | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=Unknown/Pending"
	vor := h.waitStatus("vor", waiting)
	msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message
	if msg != `Waiting for the Vald Helm Operator to deploy ValdRelease "`+h.ns+`-a".` && !strings.Contains(msg, "has no status from the Vald Helm Operator") {
		t.Errorf("message %q", msg)
	}
	h.waitFor("the condition to name a missing Vald Helm Operator", func() bool {
		return condition(h.get("vor"), valdv1.ConditionWaitingCreateVrs).Message ==
			`ValdRelease "`+h.ns+`-a" has no status from the Vald Helm Operator after 2s: is the Vald Helm Operator installed, and does it watch namespace "`+h.ns+`"?`
	})

	// a deployed, b still installing.
	h.setHelmStatus("a", `{"conditions":[{"type":"Initialized","status":"True"},{"type":"Deployed","status":"True","reason":"InstallSuccessful"}]}`)
	h.setHelmStatus("b", `{"conditions":[{"type":"Initialized","status":"True"}]}`)
	h.waitFor("the condition to wait for b", func() bool {
		return condition(h.get("vor"), valdv1.ConditionWaitingCreateVrs).Message == `Waiting for the Vald Helm Operator to deploy the current values of ValdRelease "`+h.ns+`-b".`
	})

	// b fails: Failed with the helm message, no retry.
	h.setHelmStatus("b", `{"conditions":[{"type":"Initialized","status":"True"},{"type":"ReleaseFailed","status":"True","reason":"InstallError","message":"values don't meet the specifications of the schema(s)"}]}`)
	vor = h.waitStatus("vor", "WaitingCreateVrs 1/3 Failed | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=False/Failed")
	if msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message; msg != `The Vald Helm Operator failed to deploy ValdRelease "`+h.ns+`-b" (ReleaseFailed, InstallError): values don't meet the specifications of the schema(s)` {
		t.Errorf("message %q", msg)
	}

	// The Vald Helm Operator recovers: its status change (a watch event; Failed has no
	// requeue) completes the release.
	h.setHelmStatus("b", `{"conditions":[{"type":"Initialized","status":"True"},{"type":"ReleaseFailed","status":"False"},{"type":"Deployed","status":"True","reason":"InstallSuccessful"}]}`)
	vor = h.waitStatus("vor", statusCompleted)
	if msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message; msg != "Every ValdRelease exists with the current generation and the Vald Helm Operator deployed it." {
		t.Errorf("message %q", msg)
	}
}
