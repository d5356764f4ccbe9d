package localcluster_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opsuite/suite/tools/internal/localcluster"
)

// storeKeys reads the object store's root keys from its Secret.
func storeKeys(ctx context.Context, t *testing.T, client kubernetes.Interface) (id, secret string) {
	t.Helper()
	s, err := client.CoreV1().Secrets(localcluster.ObjectStoreNamespace).Get(ctx, localcluster.ObjectStoreName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the object store's Secret: %v", err)
	}
	return string(s.Data[localcluster.ObjectStoreAccessKeyKey]), string(s.Data[localcluster.ObjectStoreSecretKeyKey])
}

// checkObjectStore: `up` left a store answering on the Service's fixed address with the
// Secret's keys (and no others), the bucket there, an object written through S3 stored as
// a file of the claim's directory.
func checkObjectStore(ctx context.Context, t *testing.T, client kubernetes.Interface, o localcluster.Options) {
	id, secret := storeKeys(ctx, t, client)
	if len(id) != 20 || len(secret) != 40 {
		t.Errorf("keys of %d and %d characters, want 20 and 40", len(id), len(secret))
	}
	svc, err := client.CoreV1().Services(localcluster.ObjectStoreNamespace).Get(ctx, localcluster.ObjectStoreName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := o.ObjectStoreIP(); svc.Spec.ClusterIP != want || !strings.HasPrefix(want, "127.") {
		t.Errorf("Service address %s, want %s", svc.Spec.ClusterIP, want)
	}
	// `up` returned only once the store answered: no waiting here.
	resp, err := http.Get(o.ObjectStoreEndpoint() + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/health from the host: %v %v", o.ObjectStoreEndpoint(), resp, err)
	}
	_ = resp.Body.Close()

	body := []byte("written through the Service " + time.Now().Format(time.RFC3339Nano))
	if code, out := s3Request(t, o, id, secret, http.MethodPut, "/backups/probe/object", body); code != http.StatusOK {
		t.Fatalf("PUT with the Secret's keys: %d %s", code, out)
	}
	if code, out := s3Request(t, o, id, secret, http.MethodGet, "/backups/probe/object", nil); code != http.StatusOK || !bytes.Equal(out, body) {
		t.Errorf("GET with the Secret's keys: %d %q, want 200 %q", code, out, body)
	}
	if code, _ := s3Request(t, o, id, strings.Repeat("x", 40), http.MethodGet, "/backups/probe/object", nil); code != http.StatusForbidden {
		t.Errorf("GET with a wrong secret: %d, want 403", code)
	}
	pvc, err := client.CoreV1().PersistentVolumeClaims(localcluster.ObjectStoreNamespace).Get(ctx, localcluster.ObjectStoreName+"-data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(o.VolumeDir(), pvc.Spec.VolumeName, localcluster.ObjectStoreBucket, "probe", "object"))
	if err != nil || !bytes.Equal(onDisk, body) {
		t.Errorf("the object on the claim's directory: %q (%v), want %q", onDisk, err, body)
	}
}

// checkObjectStoreKept: after `down --keep` and `up`, the same keys read the object again.
func checkObjectStoreKept(ctx context.Context, t *testing.T, client kubernetes.Interface, o localcluster.Options, id, secret string) {
	gotID, gotSecret := storeKeys(ctx, t, client)
	if gotID != id || gotSecret != secret {
		t.Errorf("the object store's keys changed across down --keep and up")
	}
	if code, out := s3Request(t, o, id, secret, http.MethodGet, "/backups/probe/object", nil); code != http.StatusOK || !bytes.HasPrefix(out, []byte("written through the Service")) {
		t.Errorf("GET after the restart: %d %q", code, out)
	}
}

// s3Request sends one path-style S3 request signed with AWS Signature Version 4 (the
// tools module has no S3 client; this is all a probe needs) and returns the status and body.
func s3Request(t *testing.T, o localcluster.Options, id, secret, method, path string, body []byte) (int, []byte) {
	t.Helper()
	now := time.Now().UTC()
	stamp, day := now.Format("20060102T150405Z"), now.Format("20060102")
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	req, err := http.NewRequest(method, o.ObjectStoreEndpoint()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-amz-date", stamp)
	req.Header.Set("x-amz-content-sha256", payload)
	const signed = "host;x-amz-content-sha256;x-amz-date"
	canonical := strings.Join([]string{method, path, "", "host:" + req.URL.Host, "x-amz-content-sha256:" + payload,
		"x-amz-date:" + stamp, "", signed, payload}, "\n")
	scope := day + "/" + localcluster.ObjectStoreRegion + "/s3/aws4_request"
	hashed := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + stamp + "\n" + scope + "\n" + hex.EncodeToString(hashed[:])
	mac := func(key []byte, data string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(data))
		return h.Sum(nil)
	}
	key := []byte("AWS4" + secret)
	for _, part := range []string{day, localcluster.ObjectStoreRegion, "s3", "aws4_request"} {
		key = mac(key, part)
	}
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
		id, scope, signed, hex.EncodeToString(mac(key, toSign))))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}
