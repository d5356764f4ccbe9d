package podrunner

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// reasonConfigError is the kubelet's waiting reason for a container whose configuration
// cannot be honoured (runAsNonRoot against a root user, a missing Secret key).
const reasonConfigError = "CreateContainerConfigError"

// credentials are who a container's process runs as.
type credentials struct {
	UID    int64   `json:"uid"`
	GID    int64   `json:"gid"`
	Groups []int64 `json:"groups,omitempty"`
	// NoNewPrivs is allowPrivilegeEscalation: false.
	NoNewPrivs bool `json:"noNewPrivs,omitempty"`
}

// configError is a container the kubelet would refuse to create; the pod shows it as
// waiting with reason CreateContainerConfigError and the runner retries.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

// containerCredentials applies the securityContext of the pod and of the container (the
// container's wins) to the image's user, as the kubelet and the runtime do: runAsUser,
// else the image's USER; runAsGroup, else the image's group when the image's user runs,
// else 0; fsGroup and supplementalGroups as supplementary groups. runAsNonRoot with a
// root user fails with the kubelet's message.
func containerCredentials(pod *corev1.Pod, c *corev1.Container, imageUser string) (credentials, error) {
	imageUID, imageGID, err := parseUser(imageUser)
	if err != nil {
		return credentials{}, &configError{msg: fmt.Sprintf("container %s: image %v", c.Name, err)}
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	pick := func(container, pod *int64) *int64 {
		if container != nil {
			return container
		}
		return pod
	}
	cr := credentials{UID: imageUID}
	runAsUser := pick(csc.RunAsUser, psc.RunAsUser)
	if runAsUser != nil {
		cr.UID = *runAsUser
	}
	switch g := pick(csc.RunAsGroup, psc.RunAsGroup); {
	case g != nil:
		cr.GID = *g
	case imageGID != nil && cr.UID == imageUID:
		cr.GID = *imageGID
	}
	nonRoot := csc.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = psc.RunAsNonRoot
	}
	if nonRoot != nil && *nonRoot && cr.UID == 0 {
		podName := pod.Namespace + "/" + pod.Name
		if runAsUser != nil {
			return credentials{}, &configError{msg: fmt.Sprintf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podName, c.Name)}
		}
		return credentials{}, &configError{msg: fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podName, c.Name)}
	}
	if psc.FSGroup != nil {
		cr.Groups = append(cr.Groups, *psc.FSGroup)
	}
	for _, g := range psc.SupplementalGroups {
		if !slices.Contains(cr.Groups, g) {
			cr.Groups = append(cr.Groups, g)
		}
	}
	cr.NoNewPrivs = csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation
	return cr, nil
}

// ownership is what the kubelet applies to the files it writes into a pod's volumes:
// fsUser is the one runAsUser every container sets explicitly (nil when they differ or
// one sets none), fsGroup the pod's.
type ownership struct {
	fsUser  *int64
	fsGroup *int64
}

func podOwnership(pod *corev1.Pod) ownership {
	var own ownership
	if psc := pod.Spec.SecurityContext; psc != nil {
		own.fsGroup = psc.FSGroup
	}
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for i, c := range all {
		var u *int64
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			u = c.SecurityContext.RunAsUser
		} else if pod.Spec.SecurityContext != nil {
			u = pod.Spec.SecurityContext.RunAsUser
		}
		if u == nil || (i > 0 && (own.fsUser == nil || *own.fsUser != *u)) {
			own.fsUser = nil
			return own
		}
		own.fsUser = u
	}
	return own
}

// fileAttrs returns the mode and owner of one file of a ConfigMap, Secret, downward API or
// projected volume (all read-only): items[].mode, else defaultMode, else 0644; a
// service-account token 0600 owned by fsUser when the pod has an fsUser or fsGroup; with
// an fsGroup the file's group is fsGroup and group-readable. uid or gid -1 leaves root.
func fileAttrs(f fileContent, defaultMode *int32, own ownership) (mode uint32, uid, gid int) {
	mode, uid, gid = 0o644, -1, -1
	if defaultMode != nil {
		mode = uint32(*defaultMode)
	}
	if f.mode != nil {
		mode = uint32(*f.mode)
	}
	if f.token && (own.fsUser != nil || own.fsGroup != nil) {
		mode = 0o600
		if own.fsUser != nil {
			uid = int(*own.fsUser)
		}
	}
	if own.fsGroup != nil {
		gid = int(*own.fsGroup)
		mode |= 0o440
	}
	return mode & 0o7777, uid, gid
}

// dirAttrs returns the mode and owner of a directory the runner makes for a pod: the
// volumes it writes (read-only: 0755, root), emptyDirs and the containers' scratch space
// (writable: 0750 owned by the user, group-writable and setgid with an fsGroup).
// A writable directory several users share without an fsGroup is 01777, as the kubelet's
// emptyDir is world-writable (sticky here, so users keep their files).
func dirAttrs(writable bool, user *credentials, own ownership) (mode uint32, uid, gid int) {
	mode, uid, gid = 0o755, -1, -1
	if writable {
		mode = 0o750
		switch {
		case user != nil:
			uid, gid = int(user.UID), int(user.GID)
		case own.fsUser != nil:
			uid = int(*own.fsUser)
		case own.fsGroup == nil:
			return 0o1777, -1, -1
		}
	}
	if own.fsGroup != nil {
		gid = int(*own.fsGroup)
		mode |= 0o2050
		if writable {
			mode |= 0o020
		}
	}
	return mode, uid, gid
}
