package podrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// volumeRefreshPeriod is how often ConfigMap and Secret volumes pick up changes.
const volumeRefreshPeriod = 5 * time.Second

// errNotYet marks a volume that cannot be prepared yet (an unbound claim); the pod waits.
var errNotYet = errors.New("not ready yet")

// tokenSource is a projected service-account token the runner keeps fresh.
type tokenSource struct {
	path     string
	audience string
	expiry   int64
	refresh  time.Time
	// mode and owner of the file, as first written.
	mode     uint32
	uid, gid int
}

// prepareVolumes materialises every volume of the pod as a host directory and returns
// the directory per volume name. Claims resolve to their PersistentVolume's hostPath,
// which kwok's volume stage points into the cluster state, so data outlives the pod.
func (w *podWorker) prepareVolumes(ctx context.Context, pod *corev1.Pod) (map[string]string, error) {
	own := podOwnership(pod)
	if err := mkdirOwned(filepath.Join(w.dir, "volumes"), 0o755, -1, -1); err != nil {
		return nil, err
	}
	dirs := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(w.dir, "volumes", v.Name)
		switch {
		case v.PersistentVolumeClaim != nil:
			path, block, err := w.r.claimPath(ctx, pod.Spec.NodeName, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			dir = path
			if block {
				// A raw block volume: the device itself, for the container's volumeDevices.
				break
			}
			// Made like an emptyDir; an existing one is given to the fsGroup, as the kubelet
			// gives a volume that supports ownership.
			_, statErr := os.Stat(dir)
			if os.IsNotExist(statErr) || own.fsGroup != nil {
				mode, uid, gid := dirAttrs(true, nil, own)
				if err := mkdirOwned(dir, mode, uid, gid); err != nil {
					return nil, err
				}
			}
		case v.HostPath != nil:
			dir = w.r.hostPath(pod.Spec.NodeName, v.HostPath.Path)
			if t := v.HostPath.Type; t != nil && (*t == corev1.HostPathDirectoryOrCreate) {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return nil, err
				}
			}
		case v.ConfigMap != nil:
			files, err := w.r.configMapFiles(ctx, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if err := writeFiles(dir, files, v.ConfigMap.DefaultMode, own); err != nil {
				return nil, err
			}
		case v.Secret != nil:
			files, err := w.r.secretFiles(ctx, pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if err := writeFiles(dir, files, v.Secret.DefaultMode, own); err != nil {
				return nil, err
			}
		case v.DownwardAPI != nil:
			files, err := downwardFiles(pod, v.DownwardAPI.Items)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if err := writeFiles(dir, files, v.DownwardAPI.DefaultMode, own); err != nil {
				return nil, err
			}
		case v.Projected != nil:
			if err := w.projected(ctx, pod, dir, v.Projected, own); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		default:
			// emptyDir, and any kind we cannot provide for real, is a fresh directory.
			if v.EmptyDir == nil {
				w.r.log.Warn("Used an empty directory for an unsupported volume kind", "pod", w.key, "volume", v.Name)
			}
			mode, uid, gid := dirAttrs(true, nil, own)
			if err := mkdirOwned(dir, mode, uid, gid); err != nil {
				return nil, err
			}
		}
		dirs[v.Name] = dir
	}
	return dirs, nil
}

// claimPath is where a bound claim's volume lives on the host: a directory, or for a
// raw block volume (volumeMode Block, a local PV naming a device of the pod's node) that
// node's device node, with block true.
func (r *Runner) claimPath(ctx context.Context, node, ns, claim string) (path string, block bool, err error) {
	pvc, err := r.cfg.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", false, err
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return "", false, fmt.Errorf("claim %s is not bound: %w", claim, errNotYet)
	}
	pv, err := r.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", false, err
	}
	if m := pv.Spec.VolumeMode; m != nil && *m == corev1.PersistentVolumeBlock {
		dev, err := r.blockDevice(node, pv)
		return dev, true, err
	}
	path = filepath.Join(r.cfg.StateDir, "..", "volumes", pv.Name)
	if pv.Spec.HostPath != nil {
		path = pv.Spec.HostPath.Path
	}
	return path, false, nil
}

// blockDevice resolves a Block volume's local path (e.g. /dev/disk/by-partuuid/<guid>) on
// the node's /dev to the device node it names, as the kubelet maps a local block volume.
func (r *Runner) blockDevice(node string, pv *corev1.PersistentVolume) (string, error) {
	if pv.Spec.Local == nil || !under(filepath.Clean(pv.Spec.Local.Path), "/dev") || r.cfg.NodeDevDir == "" {
		return "", fmt.Errorf("block volume %s: only local volumes naming a device under /dev of the node are supported", pv.Name)
	}
	link := r.hostPath(node, pv.Spec.Local.Path)
	dev, err := filepath.EvalSymlinks(link)
	if err != nil {
		// The node's /dev is brought up to date every second: a new partition's link may
		// not be there yet.
		return "", fmt.Errorf("block volume %s: %s: %w", pv.Name, pv.Spec.Local.Path, errors.Join(err, errNotYet))
	}
	if !under(dev, r.nodeDevDir(node)) {
		return "", fmt.Errorf("block volume %s: %s leads out of the node's /dev (%s)", pv.Name, pv.Spec.Local.Path, dev)
	}
	st, err := os.Stat(dev)
	if err != nil || st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
		return "", fmt.Errorf("block volume %s: %s is not a block device", pv.Name, dev)
	}
	return dev, nil
}

func (r *Runner) configMapFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, opt *bool) (map[string]fileContent, error) {
	cm, err := r.cfg.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && optional(opt) {
			return nil, nil
		}
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return selectItems(data, items, opt)
}

func (r *Runner) secretFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, opt *bool) (map[string]fileContent, error) {
	s, err := r.cfg.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && optional(opt) {
			return nil, nil
		}
		return nil, err
	}
	return selectItems(s.Data, items, opt)
}

type fileContent struct {
	data []byte
	mode *int32
	// token marks a service-account token, whose mode and owner follow the pod's user.
	token bool
}

func selectItems(data map[string][]byte, items []corev1.KeyToPath, opt *bool) (map[string]fileContent, error) {
	files := map[string]fileContent{}
	if len(items) == 0 {
		for k, v := range data {
			files[k] = fileContent{data: v}
		}
		return files, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional(opt) {
				continue
			}
			return nil, fmt.Errorf("key %q missing", it.Key)
		}
		files[it.Path] = fileContent{data: v, mode: it.Mode}
	}
	return files, nil
}

func downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile) (map[string]fileContent, error) {
	files := map[string]fileContent{}
	for _, it := range items {
		if it.FieldRef == nil {
			continue
		}
		v, err := fieldRefValue(pod, it.FieldRef.FieldPath)
		if err != nil {
			return nil, err
		}
		files[it.Path] = fileContent{data: []byte(v), mode: it.Mode}
	}
	return files, nil
}

// projected fills a projected volume; service-account tokens are real tokens for the
// pod's ServiceAccount, bound to the pod, requested with the TokenRequest API.
func (w *podWorker) projected(ctx context.Context, pod *corev1.Pod, dir string, p *corev1.ProjectedVolumeSource, own ownership) error {
	files := map[string]fileContent{}
	for _, src := range p.Sources {
		var part map[string]fileContent
		var err error
		switch {
		case src.ConfigMap != nil:
			part, err = w.r.configMapFiles(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional)
		case src.Secret != nil:
			part, err = w.r.secretFiles(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional)
		case src.DownwardAPI != nil:
			part, err = downwardFiles(pod, src.DownwardAPI.Items)
		case src.ServiceAccountToken != nil:
			t := src.ServiceAccountToken
			exp := int64(3607)
			if t.ExpirationSeconds != nil {
				exp = *t.ExpirationSeconds
			}
			ts := &tokenSource{path: filepath.Join(dir, t.Path), audience: t.Audience, expiry: exp}
			token, err := w.requestToken(ctx, pod, ts)
			if err != nil {
				return fmt.Errorf("requesting token: %w", err)
			}
			f := fileContent{data: []byte(token), token: true}
			ts.mode, ts.uid, ts.gid = fileAttrs(f, p.DefaultMode, own)
			w.tokens = append(w.tokens, ts)
			part = map[string]fileContent{t.Path: f}
		}
		if err != nil {
			return err
		}
		for k, v := range part {
			files[k] = v
		}
	}
	return writeFiles(dir, files, p.DefaultMode, own)
}

func (w *podWorker) requestToken(ctx context.Context, pod *corev1.Pod, ts *tokenSource) (string, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &ts.expiry,
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID,
			},
		},
	}
	if ts.audience != "" {
		req.Spec.Audiences = []string{ts.audience}
	}
	resp, err := w.r.cfg.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	// Refresh at 80% of the lifetime, as the kubelet does.
	life := time.Until(resp.Status.ExpirationTimestamp.Time)
	ts.refresh = time.Now().Add(life * 8 / 10)
	return resp.Status.Token, nil
}

// refreshTokens rewrites tokens that reached 80% of their lifetime.
func (w *podWorker) refreshTokens(ctx context.Context, pod *corev1.Pod) {
	for _, ts := range w.tokens {
		if time.Now().Before(ts.refresh) {
			continue
		}
		token, err := w.requestToken(ctx, pod, ts)
		if err != nil {
			w.r.log.Warn("Failed to refresh a service-account token", "pod", w.key, "err", err)
			continue
		}
		if err := atomicWrite(ts.path, []byte(token), ts.mode, ts.uid, ts.gid); err != nil {
			w.r.log.Warn("Failed to write a service-account token", "pod", w.key, "err", err)
		}
	}
}

// writeFiles writes the files of a read-only volume with the kubelet's modes and owners
// (fileAttrs); its directories are 0755, given to the fsGroup when there is one.
func writeFiles(dir string, files map[string]fileContent, defaultMode *int32, own ownership) error {
	dmode, duid, dgid := dirAttrs(false, nil, own)
	if err := mkdirOwned(dir, dmode, duid, dgid); err != nil {
		return err
	}
	for name, f := range files {
		if strings.Contains(name, "..") {
			return fmt.Errorf("invalid path %q", name)
		}
		path := filepath.Join(dir, name)
		if sub := filepath.Dir(filepath.Clean(name)); sub != "." {
			p := dir
			for _, part := range strings.Split(sub, "/") {
				p = filepath.Join(p, part)
				if err := mkdirOwned(p, dmode, duid, dgid); err != nil {
					return err
				}
			}
		}
		mode, uid, gid := fileAttrs(f, defaultMode, own)
		if err := atomicWrite(path, f.data, mode, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// mkdirOwned makes dir (and missing parents, 0755) and gives dir the mode and owner;
// uid or gid -1 leaves that part root's.
func mkdirOwned(dir string, mode uint32, uid, gid int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return chownMode(dir, mode, uid, gid)
}

// chownMode sets owner then mode (chown clears setuid/setgid bits).
func chownMode(path string, mode uint32, uid, gid int) error {
	if uid >= 0 || gid >= 0 {
		if err := os.Lchown(path, uid, gid); err != nil {
			return err
		}
	}
	return syscall.Chmod(path, mode)
}

// atomicWrite replaces path by rename, so a reader never sees half a file; volumes are
// bind-mounted as directories, so the new file is visible inside the pod.
func atomicWrite(path string, data []byte, mode uint32, uid, gid int) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := chownMode(tmp, mode, uid, gid); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// refreshVolumes rewrites ConfigMap, Secret and downward API content that changed, as
// the kubelet's periodic sync does; files are replaced by rename, so a process sees
// either the old or the new content.
func (w *podWorker) refreshVolumes(ctx context.Context, pod *corev1.Pod) {
	if time.Now().Before(w.nextRefresh) {
		return
	}
	w.nextRefresh = time.Now().Add(volumeRefreshPeriod)
	own := podOwnership(pod)
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(w.dir, "volumes", v.Name)
		var files map[string]fileContent
		var mode *int32
		var err error
		switch {
		case v.ConfigMap != nil:
			files, err = w.r.configMapFiles(ctx, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional)
			mode = v.ConfigMap.DefaultMode
		case v.Secret != nil:
			files, err = w.r.secretFiles(ctx, pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional)
			mode = v.Secret.DefaultMode
		case v.DownwardAPI != nil:
			files, err = downwardFiles(pod, v.DownwardAPI.Items)
			mode = v.DownwardAPI.DefaultMode
		case v.Projected != nil:
			files = map[string]fileContent{}
			mode = v.Projected.DefaultMode
			for _, src := range v.Projected.Sources {
				var part map[string]fileContent
				switch {
				case src.ConfigMap != nil:
					part, err = w.r.configMapFiles(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional)
				case src.Secret != nil:
					part, err = w.r.secretFiles(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional)
				case src.DownwardAPI != nil:
					part, err = downwardFiles(pod, src.DownwardAPI.Items)
				}
				if err != nil {
					break
				}
				for k, f := range part {
					files[k] = f
				}
			}
		default:
			continue
		}
		if err != nil {
			continue // keep the last content, as the kubelet does
		}
		for name, f := range files {
			path := filepath.Join(dir, name)
			if old, err := os.ReadFile(path); err == nil && string(old) == string(f.data) {
				delete(files, name)
			}
		}
		if len(files) > 0 {
			if err := writeFiles(dir, files, mode, own); err != nil {
				w.r.log.Warn("Failed to refresh a volume", "pod", w.key, "volume", v.Name, "err", err)
			}
		}
	}
}
