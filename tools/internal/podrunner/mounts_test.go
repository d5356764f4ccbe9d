package podrunner

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestMountTable(t *testing.T) {
	const hosts, scratch = "/state/uid/hosts", "/state/uid/containers/c"
	vols := map[string]string{"data": "/vol/data", "conf": "/vol/conf", "etc": "/vol/etc", "disk": "/dev/loop7"}
	vars := map[string]string{"POD_NAME": "web-0"}
	hostsMount := containerMount{Source: hosts, Target: "/etc/hosts", ReadOnly: true}
	tests := []struct {
		name     string
		c        corev1.Container
		imageDir string
		want     []containerMount
		wantDir  string
		wantErr  string
	}{
		{name: "no working directory: the writable layer is where it starts",
			want: []containerMount{hostsMount}, wantDir: scratch},
		{name: "image working directory gets the writable layer", imageDir: "/data",
			want: []containerMount{hostsMount, {Source: scratch, Target: "/data"}}, wantDir: "/data"},
		{name: "container working directory beats the image's", imageDir: "/data", c: corev1.Container{WorkingDir: "/work"},
			want: []containerMount{hostsMount, {Source: scratch, Target: "/work"}}, wantDir: "/work"},
		{name: "a volume at the working directory replaces the writable layer", imageDir: "/data",
			c:    corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}},
			want: []containerMount{hostsMount, {Source: "/vol/data", Target: "/data", Volume: "data"}}, wantDir: "/data"},
		{name: "a volume above the working directory covers it", c: corev1.Container{WorkingDir: "/data/db",
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}},
			want: []containerMount{hostsMount, {Source: "/vol/data", Target: "/data", Volume: "data"}}, wantDir: "/data/db"},
		{name: "a mount inside another volume is nested, read-only kept",
			c: corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"},
				{Name: "conf", MountPath: "/data/conf", ReadOnly: true}}},
			want: []containerMount{hostsMount, {Source: "/vol/data", Target: "/data", Volume: "data"},
				{Source: "/vol/conf", Target: "/data/conf", ReadOnly: true, Volume: "conf", Nested: true}}, wantDir: scratch},
		{name: "a volume at /etc makes the hosts file nested",
			c: corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "etc", MountPath: "/etc"}}},
			want: []containerMount{{Source: hosts, Target: "/etc/hosts", ReadOnly: true, Nested: true},
				{Source: "/vol/etc", Target: "/etc", Volume: "etc"}}, wantDir: scratch},
		{name: "a sibling with a common prefix is not nested",
			c: corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "conf", MountPath: "/database"}}},
			want: []containerMount{hostsMount, {Source: "/vol/data", Target: "/data", Volume: "data"},
				{Source: "/vol/conf", Target: "/database", Volume: "conf"}}, wantDir: scratch},
		{name: "a mount path with a trailing slash is not inside itself",
			c:    corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data/"}}},
			want: []containerMount{hostsMount, {Source: "/vol/data", Target: "/data/", Volume: "data"}}, wantDir: scratch},
		{name: "subPath stays inside its volume",
			c:       corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/app.conf", SubPath: "../../app.conf"}}},
			want:    []containerMount{hostsMount, {Source: "/vol/conf/app.conf", Target: "/etc/app.conf", Volume: "conf", SubPathOf: "/vol/conf"}},
			wantDir: scratch},
		{name: "subPathExpr is expanded",
			c:       corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data", SubPathExpr: "pods/$(POD_NAME)"}}},
			want:    []containerMount{hostsMount, {Source: "/vol/data/pods/web-0", Target: "/data", Volume: "data", SubPathOf: "/vol/data"}},
			wantDir: scratch},
		{name: "raw block device at its path, after the volume mounts",
			c: corev1.Container{VolumeDevices: []corev1.VolumeDevice{{Name: "disk", DevicePath: "/dev/xvda"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}},
			want: []containerMount{hostsMount, {Source: "/vol/data", Target: "/data", Volume: "data"},
				{Source: "/dev/loop7", Target: "/dev/xvda", Volume: "disk", Device: true}}, wantDir: scratch},
		{name: "missing volume", c: corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "gone", MountPath: "/x"}}},
			wantErr: "volume gone not found"},
		{name: "missing device volume", c: corev1.Container{VolumeDevices: []corev1.VolumeDevice{{Name: "gone", DevicePath: "/dev/x"}}},
			wantErr: "volume gone not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dir, err := mountTable(&tt.c, tt.imageDir, hosts, scratch, vols, vars)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) || dir != tt.wantDir {
				t.Errorf("got dir %q, mounts\n%+v\nwant dir %q, mounts\n%+v", dir, got, tt.wantDir, tt.want)
			}
		})
	}
}
