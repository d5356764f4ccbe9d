package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	"github.com/opsuite/suite/tools/internal/bolt/boltclient"
)

// The TLS sample's cluster and certificate Secret, as deploy/samples/tls/memgraph-tls.yaml
// names them.
const (
	mgTLSName   = "memgraph-tls"
	mgTLSSecret = "memgraph-tls-bolt"
)

// TestMemgraphTLSSample applies deploy/samples/tls/memgraph-tls.yaml verbatim with the
// Secrets it relies on (the license and auth Secrets of deploy/samples/memgraph.yaml, and a
// certificate Secret shaped as cert-manager writes it, from a test CA, naming the pods'
// wildcard DNS names as the README's recipe does). The operator must reach the pods over
// bolt+s to register them: Ready proves it. Then every pod serves Bolt over TLS with a
// certificate the CA verifies for its DNS name, refuses plain Bolt, and the coordinators
// report 3 coordinators and 2 data instances, one MAIN, all up.
func TestMemgraphTLSSample(t *testing.T) {
	ctx := mgScenario(t)
	secrets := sampleSecrets(t, filepath.Join(env.root, "deploy", "samples", "memgraph.yaml"))
	if out, err := kubectlStdin(ctx, secrets, "apply", "-f", "-"); err != nil {
		t.Fatalf("applying the sample's Secrets: %v\n%s", err, out)
	}
	ca := testenv.NewCA(t, "e2e memgraph-tls CA")
	crt, key := ca.Issue(t, "*."+mgTLSName+"-coordinators."+mgNamespace+".svc.cluster.local", "*."+mgTLSName+"-data."+mgNamespace+".svc.cluster.local")
	_, err := env.client.CoreV1().Secrets(mgNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: mgTLSSecret, Namespace: mgNamespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.PEM},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sample := filepath.Join(env.root, "deploy", "samples", "tls", "memgraph-tls.yaml")
	begin := time.Now()
	if out, err := kubectl(ctx, "apply", "-f", sample); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		bg := context.Background()
		for _, args := range [][]string{{"delete", "-f", sample, "--wait=false"}, {"delete", "secret", mgTLSSecret, "-n", mgNamespace}} {
			if out, err := kubectl(bg, args...); err != nil {
				t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		if out, err := kubectlStdin(bg, secrets, "delete", "-f", "-"); err != nil {
			t.Logf("deleting the sample's Secrets: %v\n%s", err, out)
		}
	})

	var c *memgraphv1.MemgraphCluster
	err = poll(ctx, t, "MemgraphCluster "+mgTLSName+" Ready", 4*time.Minute, func(ctx context.Context) (bool, error) {
		got, err := mgClusterNamed(ctx, mgTLSName)
		if err != nil {
			return transient(err)
		}
		c = got
		converged := meta.FindStatusCondition(got.Status.Conditions, memgraphv1.ConditionConverged)
		return got.Status.State == memgraphv1.StateReady && converged != nil && converged.Status == metav1.ConditionTrue &&
			converged.ObservedGeneration == got.Generation, nil
	})
	if err != nil {
		if c != nil {
			t.Logf("last seen: %s", mgDescribe(c))
		}
		t.Fatalf("the TLS sample did not become Ready: %v", err)
	}
	t.Logf("time to Ready for 3+2 over bolt+s: %s (MAIN %s, leader %s)", since(begin), c.Status.Main, c.Status.Leader)

	login := mgCredentials(ctx, t, c)
	pods := []string{mgTLSName + "-data-0", mgTLSName + "-data-1"}
	for i := 1; i <= 3; i++ {
		pods = append(pods, fmt.Sprintf("%s-coordinator-%d", mgTLSName, i))
	}
	configs, addrs := map[string]*tls.Config{}, map[string]string{}
	for _, pod := range pods {
		addr, err := mgPodBolt(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		mgExporterReads(ctx, t, addr, pod)
		svc := mgTLSName + "-data"
		if strings.Contains(pod, "-coordinator-") {
			svc = mgTLSName + "-coordinators"
		}
		o := login
		o.Timeout = mgCall
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(), ServerName: pod + "." + svc + "." + mgNamespace + ".svc.cluster.local"}
		query := "SHOW REPLICATION ROLE;"
		if svc == mgTLSName+"-coordinators" {
			query = "SHOW INSTANCES;"
		}
		cctx, cancel := context.WithTimeout(ctx, mgCall)
		res, err := boltclient.Query(cctx, addr, o, query)
		cancel()
		if err != nil {
			t.Errorf("%s over TLS as %s: %v", pod, o.TLS.ServerName, err)
			continue
		}
		if id, ok := strings.CutPrefix(c.Status.Leader, "coordinator_"); ok && pod == mgTLSName+"-coordinator-"+id {
			rows, err := mgInstances(res)
			if err != nil {
				t.Fatal(err)
			}
			if main, why := mgMembershipProblemOf(mgTLSName, rows, 3, 2); why != "" {
				t.Errorf("the leader %s: %s", pod, why)
			} else {
				t.Logf("the leader %s: 3 coordinators and 2 data instances up, MAIN %s", pod, main)
			}
		}
		configs[pod] = o.TLS
		addrs[pod] = addr
		plain := login
		plain.Timeout = mgCall
		cctx, cancel = context.WithTimeout(ctx, mgCall)
		_, err = boltclient.Query(cctx, addr, plain, "RETURN 1;")
		cancel()
		if err == nil {
			t.Errorf("%s answered plain Bolt", pod)
		} else {
			t.Logf("%s: TLS answered, plain Bolt refused (%v)", pod, err)
		}
	}

	// Renewal: a new certificate in the Secret reaches every pod's mounted files (the
	// kubelet's sync), and Memgraph serves it only after RELOAD BOLT_SERVER TLS, which the
	// operator runs at a pass on the members still serving the old one.
	crt2, key2 := ca.Issue(t, "*."+mgTLSName+"-coordinators."+mgNamespace+".svc.cluster.local", "*."+mgTLSName+"-data."+mgNamespace+".svc.cluster.local")
	renewed := time.Now()
	patch := fmt.Sprintf(`{"data":{"tls.crt":%q,"tls.key":%q}}`, base64.StdEncoding.EncodeToString(crt2), base64.StdEncoding.EncodeToString(key2))
	if _, err := env.client.CoreV1().Secrets(mgNamespace).Patch(ctx, mgTLSSecret, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(crt2)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	want := leaf.SerialNumber.String()
	var stale []string
	err = poll(ctx, t, "every pod serving the renewed certificate", 2*time.Minute, func(ctx context.Context) (bool, error) {
		stale = stale[:0]
		for _, pod := range pods {
			if got, err := mgServedSerial(ctx, addrs[pod], configs[pod]); err != nil || got != want {
				stale = append(stale, fmt.Sprintf("%s (%v)", pod, err))
			}
		}
		return len(stale) == 0, nil
	})
	if err != nil {
		t.Fatalf("still serving the old certificate: %v: %v", stale, err)
	}
	t.Logf("every pod serves the renewed certificate (serial %s) %s after the Secret changed, no pod restarted", want, since(renewed))
	for _, pod := range pods {
		p, err := env.client.CoreV1().Pods(mgNamespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 0 || p.CreationTimestamp.After(renewed) {
				t.Errorf("%s restarted for the renewal (restarts %d, created %s)", pod, cs.RestartCount, p.CreationTimestamp)
			}
		}
	}

	mgGrowVolumes(ctx, t)
}

// mgGrowVolumes grows the TLS sample's data instances' lib volumes 1Gi -> 2Gi (the local
// cluster's pvc-resize stage plays the storage driver): VolumesResized turns True, both
// claims have 2Gi, the recreated StatefulSet's template asks 2Gi, the coordinators' claims
// and every pod are untouched, and the cluster is Ready again.
func mgGrowVolumes(ctx context.Context, t *testing.T) {
	t.Helper()
	uids := map[string]types.UID{}
	pods, err := env.client.CoreV1().Pods(mgNamespace).List(ctx, metav1.ListOptions{LabelSelector: "memgraph.com/cluster=" + mgTLSName})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		uids[p.Name] = p.UID
	}
	coordClaim := "lib-" + mgTLSName + "-coordinator-1"
	before, err := env.client.CoreV1().PersistentVolumeClaims(mgNamespace).Get(ctx, coordClaim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if out, err := kubectl(ctx, "patch", "mgc", mgTLSName, "-n", mgNamespace, "--type", "merge", "-p", `{"spec":{"storage":{"data":{"libPVCSize":"2Gi"}}}}`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var seen []string
	err = poll(ctx, t, "VolumesResized=True and Ready after growing lib to 2Gi", 3*time.Minute, func(ctx context.Context) (bool, error) {
		c, err := mgClusterNamed(ctx, mgTLSName)
		if err != nil {
			return transient(err)
		}
		r := meta.FindStatusCondition(c.Status.Conditions, "VolumesResized")
		conv := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionConverged)
		if conv != nil {
			line := conv.Reason
			if r != nil {
				line += "/" + r.Reason
			}
			if len(seen) == 0 || seen[len(seen)-1] != line {
				seen = append(seen, line)
			}
		}
		return r != nil && r.Status == metav1.ConditionTrue && r.ObservedGeneration == c.Generation &&
			c.Status.State == memgraphv1.StateReady && conv != nil && conv.Status == metav1.ConditionTrue, nil
	})
	t.Logf("Converged/VolumesResized reasons seen: %s", strings.Join(seen, " -> "))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lib volumes of the data instances grown to 2Gi in %s", since(begin))
	want := resource.MustParse("2Gi")
	for i := range 2 {
		name := fmt.Sprintf("lib-%s-data-%d", mgTLSName, i)
		pvc, err := env.client.CoreV1().PersistentVolumeClaims(mgNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		req, got := pvc.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
		if req.Cmp(want) != 0 || got.Cmp(want) != 0 {
			t.Errorf("claim %s requests %s with capacity %s, want 2Gi", name, req.String(), got.String())
		}
	}
	after, err := env.client.CoreV1().PersistentVolumeClaims(mgNamespace).Get(ctx, coordClaim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, a := before.Spec.Resources.Requests[corev1.ResourceStorage], after.Spec.Resources.Requests[corev1.ResourceStorage]; b.Cmp(a) != 0 || after.UID != before.UID {
		t.Errorf("coordinator claim %s changed: %s -> %s", coordClaim, b.String(), a.String())
	}
	sts, err := env.client.AppsV1().StatefulSets(mgNamespace).Get(ctx, mgTLSName+"-data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range sts.Spec.VolumeClaimTemplates {
		if q := tmpl.Spec.Resources.Requests[corev1.ResourceStorage]; tmpl.Name == "lib" && q.Cmp(want) != 0 {
			t.Errorf("StatefulSet %s claim template lib asks %s, want 2Gi", sts.Name, q.String())
		}
	}
	pods, err = env.client.CoreV1().Pods(mgNamespace).List(ctx, metav1.ListOptions{LabelSelector: "memgraph.com/cluster=" + mgTLSName})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if uids[p.Name] != p.UID {
			t.Errorf("pod %s was replaced by the resize", p.Name)
		}
	}
	if len(pods.Items) != len(uids) {
		t.Errorf("%d pods after the resize, %d before", len(pods.Items), len(uids))
	}
}

// mgServedSerial is the serial number of the leaf certificate a pod serves Bolt with
// (verified by the CA for its DNS name).
func mgServedSerial(ctx context.Context, addr string, cfg *tls.Config) (string, error) {
	d := tls.Dialer{Config: cfg}
	cctx, cancel := context.WithTimeout(ctx, mgCall)
	defer cancel()
	conn, err := d.DialContext(cctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// sampleSecrets is the Secret documents of a sample file, for a test that needs them
// without the sample's other objects.
func sampleSecrets(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, doc := range strings.Split(string(b), "\n---") {
		if strings.Contains(doc, "\nkind: Secret\n") {
			docs = append(docs, doc)
		}
	}
	if len(docs) == 0 {
		t.Fatalf("%s holds no Secret", path)
	}
	return strings.Join(docs, "\n---\n")
}

// mgExporterPort is where the metrics-exporter sidecar serves by default
// (spec.metricsExporter.port, memgraph/prometheus-exporter's 9115).
const mgExporterPort = 9115

// mgExporterReads waits until the metrics-exporter sidecar of pod (whose Bolt address is
// boltAddr) serves the member's series: with spec.tls.bolt Memgraph serves its metrics
// over HTTPS under the Bolt certificate, which the sidecar pins.
func mgExporterReads(ctx context.Context, t *testing.T, boltAddr, pod string) {
	t.Helper()
	host, _, err := net.SplitHostPort(boltAddr)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(mgExporterPort)) + "/metrics"
	want := `memory_usage{instance_name="` + pod + `"}`
	var last string
	err = poll(ctx, t, pod+"'s metrics-exporter reading Memgraph over HTTPS", time.Minute, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		last = fmt.Sprintf("HTTP %d: %.300s", resp.StatusCode, b)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), want), nil
	})
	if err != nil {
		t.Errorf("%v; last answer of %s: %s", err, url, last)
	}
}
