package objectstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/objectstore"
	"github.com/opsuite/suite/shared/objectstore/objectstoretest"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// A stream of unknown length larger than several parts is stored whole, its checksum is
// the one of what was read, and it downloads byte for byte.
func TestPutStreamsMultipartAndGetReadsItBack(t *testing.T) {
	srv := objectstoretest.Start(t)
	st, err := objectstore.New(objectstore.Settings{Endpoint: srv.Endpoint, Bucket: "backups", Prefix: "/ns/one/", Region: objectstoretest.Region, PartSize: 5 << 20}, srv.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureBucket(ctx(t)); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 23<<20+123) // five parts, the last short
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(data)
	want := sha256.Sum256(data)

	// io.MultiReader hides the length, as a socket does.
	up, err := st.Put(ctx(t), "b1/shard-0.rdb", io.MultiReader(bytes.NewReader(data)), "application/octet-stream")
	if err != nil {
		t.Fatal(err)
	}
	if up.Key != "ns/one/b1/shard-0.rdb" || up.Size != int64(len(data)) || up.SHA256 != hex.EncodeToString(want[:]) {
		t.Fatalf("uploaded %+v, want key ns/one/b1/shard-0.rdb, size %d, sha %x", up, len(data), want)
	}
	r, err := st.Get(ctx(t), "b1/shard-0.rdb")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, r)
	_ = r.Close()
	if err != nil || n != int64(len(data)) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("downloaded %d bytes (err %v), sha %x; want %d, %x", n, err, h.Sum(nil), len(data), want)
	}
}

// Two stores in one bucket under different prefixes never see each other's objects, and
// list, delete and a missing object behave.
func TestPrefixesIsolateListAndDelete(t *testing.T) {
	srv := objectstoretest.Start(t)
	a := srv.Store(t, "shared", "clusters/ns/a")
	b := srv.Store(t, "shared", "clusters/ns/ab") // a prefix of the other's name, not of its folder
	for _, name := range []string{"x/1", "x/2", "y"} {
		if err := a.PutBytes(ctx(t), name, []byte("a-"+name), "text/plain"); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.PutBytes(ctx(t), "x/1", []byte("b"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	got, err := a.List(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[{x/1 5} {x/2 5} {y 3}]" {
		t.Fatalf("a lists %v", got)
	}
	if got, _ := b.List(ctx(t), ""); fmt.Sprint(got) != "[{x/1 1}]" {
		t.Fatalf("b lists %v", got)
	}
	if got, _ := a.List(ctx(t), "x/"); len(got) != 2 {
		t.Fatalf("a lists under x/: %v", got)
	}
	if v, err := b.GetBytes(ctx(t), "x/1", 10); err != nil || string(v) != "b" {
		t.Fatalf("b x/1 = %q, %v", v, err)
	}
	if n, err := a.DeleteAll(ctx(t), "x/"); n != 2 || err != nil {
		t.Fatalf("DeleteAll = %d, %v", n, err)
	}
	if _, err := a.Get(ctx(t), "x/1"); !objectstore.IsNotFound(err) {
		t.Fatalf("Get of a deleted object = %v, want not found", err)
	}
	if err := a.Delete(ctx(t), "x/1"); err != nil {
		t.Fatalf("deleting a missing object: %v", err)
	}
	if got, _ := b.List(ctx(t), ""); len(got) != 1 {
		t.Fatalf("b lost its object to a's deletion: %v", got)
	}
	if _, err := a.GetBytes(ctx(t), "y", 2); err == nil {
		t.Fatal("GetBytes read past its limit")
	}
}

// An endpoint signed by a private CA is reached with that CA and refused without it.
func TestTLSWithCustomCA(t *testing.T) {
	ca := testenv.NewCA(t, "object store CA")
	srv := objectstoretest.Start(t, objectstoretest.WithTLS(ca))
	if !strings.HasPrefix(srv.Endpoint, "https://") {
		t.Fatalf("endpoint %s is not https", srv.Endpoint)
	}
	st := srv.Store(t, "tls", "p")
	if _, err := st.Put(ctx(t), "k", strings.NewReader("over tls"), ""); err != nil {
		t.Fatal(err)
	}
	s := srv.Settings("tls", "p")
	s.CA = nil
	noCA, err := objectstore.New(s, srv.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	if err := noCA.CheckBucket(ctx(t)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v, want a certificate error", err)
	}
	s.CA = testenv.NewCA(t, "another CA").PEM
	other, _ := objectstore.New(s, srv.Credentials())
	if err := other.CheckBucket(ctx(t)); err == nil {
		t.Fatal("a client trusting another CA reached the server")
	}
}

// Wrong keys are refused, and neither the error nor a printed Credentials shows them.
func TestCredentialsNeverPrinted(t *testing.T) {
	srv := objectstoretest.Start(t)
	srv.Store(t, "creds", "")
	bad := objectstore.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: "wrong-secret-value"}
	st, err := objectstore.New(srv.Settings("creds", ""), bad)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Put(ctx(t), "k", strings.NewReader("x"), "")
	if err == nil {
		t.Fatal("a wrong secret key was accepted")
	}
	for _, s := range []string{err.Error(), fmt.Sprint(bad), fmt.Sprintf("%+v", bad), fmt.Sprintf("%#v", bad)} {
		if strings.Contains(s, "wrong-secret-value") {
			t.Fatalf("secret printed: %s", s)
		}
	}
}

func TestCredentialsFromSecret(t *testing.T) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3"}, Data: map[string][]byte{
		"AWS_ACCESS_KEY_ID": []byte("AK"), "AWS_SECRET_ACCESS_KEY": []byte("SK"), "key": []byte("K2"), "secret": []byte("S2"),
	}}
	c, err := objectstore.CredentialsFromSecret(sec, objectstore.SecretKeys{})
	if err != nil || c.AccessKeyID != "AK" || c.SecretAccessKey != "SK" || c.SessionToken != "" {
		t.Fatalf("default keys: %v %v", c.AccessKeyID, err)
	}
	c, err = objectstore.CredentialsFromSecret(sec, objectstore.SecretKeys{AccessKeyID: "key", SecretAccessKey: "secret"})
	if err != nil || c.AccessKeyID != "K2" || c.SecretAccessKey != "S2" {
		t.Fatalf("named keys: %v %v", c.AccessKeyID, err)
	}
	_, err = objectstore.CredentialsFromSecret(sec, objectstore.SecretKeys{SecretAccessKey: "missing"})
	if err == nil || !strings.Contains(err.Error(), `"missing"`) || !strings.Contains(err.Error(), `"s3"`) || strings.Contains(err.Error(), "AK") {
		t.Fatalf("missing key: %v", err)
	}
}

func TestNewRejectsBadSettings(t *testing.T) {
	for _, s := range []objectstore.Settings{
		{Endpoint: "http://h:9000"},
		{Endpoint: "h:9000", Bucket: "b"},
		{Endpoint: "ftp://h", Bucket: "b"},
		{Endpoint: "http://h/bucket", Bucket: "b"},
		{Endpoint: "http://h", Bucket: "b", CA: []byte("x")},
		{Endpoint: "https://h", Bucket: "b", CA: []byte("not pem")},
		{Endpoint: "https://h", Bucket: "b", PartSize: 1 << 20},
	} {
		if _, err := objectstore.New(s, objectstore.Credentials{}); err == nil {
			t.Errorf("New(%+v) accepted", s)
		}
	}
	st, err := objectstore.New(objectstore.Settings{Bucket: "b", Prefix: "//a//b/"}, objectstore.Credentials{})
	if err != nil || st.Key("c") != "a/b/c" {
		t.Fatalf("default endpoint and prefix: %v", err)
	}
}
