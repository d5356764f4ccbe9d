package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// keepNode saves node as it is now and returns what creates it again (nothing when it
// exists): a lost-node scenario deletes a node of the local cluster, and the scenarios
// after it need every node, with its labels, annotations and status (kwok keeps a node it
// finds by its annotation). The node is created again when the test ends, whatever
// happened; a failure to do so fails the test, since every later scenario would miss it.
func keepNode(ctx context.Context, t *testing.T, node string) func(context.Context) error {
	t.Helper()
	saved, err := env.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restore := func(ctx context.Context) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: saved.Name, Labels: saved.Labels, Annotations: saved.Annotations}, Status: saved.Status}
		_, err := env.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	t.Cleanup(func() {
		if err := restore(context.Background()); err != nil {
			t.Errorf("creating node %s again: %v", node, err)
		}
	})
	return restore
}
