package podrunner

import (
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestContainerCredentials(t *testing.T) {
	pod := func(psc *corev1.PodSecurityContext, csc *corev1.SecurityContext) (*corev1.Pod, *corev1.Container) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
			Spec: corev1.PodSpec{SecurityContext: psc, Containers: []corev1.Container{{Name: "c", SecurityContext: csc}}}}
		return p, &p.Spec.Containers[0]
	}
	tests := []struct {
		name      string
		psc       *corev1.PodSecurityContext
		csc       *corev1.SecurityContext
		imageUser string
		want      credentials
		wantErr   string
	}{
		{name: "image user", imageUser: "65532:65532", want: credentials{UID: 65532, GID: 65532}},
		{name: "root image, nothing set", want: credentials{}},
		{name: "pod runAsUser, image group not its own", psc: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
			imageUser: "65532:65532", want: credentials{UID: 1000}},
		{name: "container wins", psc: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000)},
			csc: &corev1.SecurityContext{RunAsUser: ptr.To[int64](2000), RunAsGroup: ptr.To[int64](3000)}, want: credentials{UID: 2000, GID: 3000}},
		{name: "groups", psc: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1), FSGroup: ptr.To[int64](5), SupplementalGroups: []int64{5, 6}},
			csc: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}, want: credentials{UID: 1, Groups: []int64{5, 6}, NoNewPrivs: true}},
		{name: "non-root image passes runAsNonRoot", psc: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			imageUser: "65532:65532", want: credentials{UID: 65532, GID: 65532}},
		{name: "runAsNonRoot with a root image", psc: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			wantErr: `container has runAsNonRoot and image will run as root (pod: "ns/p", container: c)`},
		{name: "runAsNonRoot with runAsUser 0", csc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)},
			imageUser: "65532", wantErr: `container's runAsUser breaks non-root policy (pod: "ns/p", container: c)`},
		{name: "container's runAsNonRoot false beats the pod's", psc: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			csc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(false), RunAsUser: ptr.To[int64](0)}, want: credentials{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, c := pod(tt.psc, tt.csc)
			got, err := containerCredentials(p, c, tt.imageUser)
			if tt.wantErr != "" {
				var ce *configError
				if !errors.As(err, &ce) || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want configError %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestPodOwnership(t *testing.T) {
	c := func(uid *int64) corev1.Container {
		if uid == nil {
			return corev1.Container{}
		}
		return corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsUser: uid}}
	}
	tests := []struct {
		name   string
		psc    *corev1.PodSecurityContext
		inits  []corev1.Container
		conts  []corev1.Container
		fsUser *int64
	}{
		{"none set", nil, nil, []corev1.Container{c(nil)}, nil},
		{"pod-wide", &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](7)}, nil, []corev1.Container{c(nil), c(nil)}, ptr.To[int64](7)},
		{"same everywhere", nil, []corev1.Container{c(ptr.To[int64](7))}, []corev1.Container{c(ptr.To[int64](7))}, ptr.To[int64](7)},
		{"differ", nil, nil, []corev1.Container{c(ptr.To[int64](7)), c(ptr.To[int64](8))}, nil},
		{"one unset", nil, nil, []corev1.Container{c(ptr.To[int64](7)), c(nil)}, nil},
	}
	for _, tt := range tests {
		p := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: tt.psc, InitContainers: tt.inits, Containers: tt.conts}}
		got := podOwnership(p).fsUser
		if !reflect.DeepEqual(got, tt.fsUser) {
			t.Errorf("%s: fsUser %v, want %v", tt.name, ptr.Deref(got, -1), ptr.Deref(tt.fsUser, -1))
		}
	}
}

func TestFileAttrs(t *testing.T) {
	own := func(user, group *int64) ownership { return ownership{fsUser: user, fsGroup: group} }
	tests := []struct {
		name        string
		f           fileContent
		defaultMode *int32
		own         ownership
		mode        uint32
		uid, gid    int
	}{
		{"Kubernetes' default", fileContent{}, nil, own(nil, nil), 0o644, -1, -1},
		{"defaultMode", fileContent{}, ptr.To[int32](0o400), own(nil, nil), 0o400, -1, -1},
		{"item mode wins", fileContent{mode: ptr.To[int32](0o600)}, ptr.To[int32](0o400), own(nil, nil), 0o600, -1, -1},
		{"fsGroup reads", fileContent{}, ptr.To[int32](0o400), own(nil, ptr.To[int64](9)), 0o440, -1, 9},
		{"token without a pod user", fileContent{token: true}, ptr.To[int32](0o644), own(nil, nil), 0o644, -1, -1},
		{"token of the pod's user", fileContent{token: true}, ptr.To[int32](0o644), own(ptr.To[int64](65532), nil), 0o600, 65532, -1},
		{"token with fsGroup", fileContent{token: true}, ptr.To[int32](0o644), own(nil, ptr.To[int64](9)), 0o640, -1, 9},
	}
	for _, tt := range tests {
		mode, uid, gid := fileAttrs(tt.f, tt.defaultMode, tt.own)
		if mode != tt.mode || uid != tt.uid || gid != tt.gid {
			t.Errorf("%s: %o %d:%d, want %o %d:%d", tt.name, mode, uid, gid, tt.mode, tt.uid, tt.gid)
		}
	}
}

func TestDirAttrs(t *testing.T) {
	user := &credentials{UID: 65532, GID: 65532}
	tests := []struct {
		name     string
		writable bool
		user     *credentials
		own      ownership
		mode     uint32
		uid, gid int
	}{
		{"read-only volume", false, nil, ownership{}, 0o755, -1, -1},
		{"read-only volume, fsGroup", false, nil, ownership{fsGroup: ptr.To[int64](9)}, 0o2755, -1, 9},
		{"scratch of a user", true, user, ownership{}, 0o750, 65532, 65532},
		{"emptyDir of the pod's user", true, nil, ownership{fsUser: ptr.To[int64](7)}, 0o750, 7, -1},
		{"emptyDir, fsGroup", true, nil, ownership{fsGroup: ptr.To[int64](9)}, 0o2770, -1, 9},
		{"emptyDir shared by users without fsGroup", true, nil, ownership{}, 0o1777, -1, -1},
	}
	for _, tt := range tests {
		mode, uid, gid := dirAttrs(tt.writable, tt.user, tt.own)
		if mode != tt.mode || uid != tt.uid || gid != tt.gid {
			t.Errorf("%s: %o %d:%d, want %o %d:%d", tt.name, mode, uid, gid, tt.mode, tt.uid, tt.gid)
		}
	}
}

func TestCrashBackoff(t *testing.T) {
	var b crashBackoff
	t0 := time.Unix(1000, 0)
	var got []time.Duration
	for range 8 {
		got = append(got, b.next(t0, t0.Add(time.Second)))
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	// Ten minutes of running start the back-off over.
	if d := b.next(t0, t0.Add(10*time.Minute)); d != 0 {
		t.Errorf("after 10 minutes running: %v, want an immediate restart", d)
	}
	if d := b.next(t0, t0.Add(time.Second)); d != 10*time.Second {
		t.Errorf("the crash after that: %v, want 10s", d)
	}
}
