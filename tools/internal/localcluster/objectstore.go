package localcluster

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The object store a cluster runs with Options.ObjectStore (`make up` does): versitygw
// (posix backend) as a Deployment of one pod in its own namespace, the process runner
// standing in .cache/bin/versitygw for its image, its data on a claim (a directory under
// the cluster's state that outlives the pod), its root keys in a Secret, and a Service
// on a fixed ClusterIP so pods reach it by name and the host by address.
const (
	ObjectStoreNamespace = "objectstore"
	// ObjectStoreName names the Deployment, the Service and the Secret.
	ObjectStoreName = "objectstore"
	// ObjectStoreBucket is the bucket the cluster creates at start.
	ObjectStoreBucket = "backups"
	ObjectStorePort   = 7070
	ObjectStoreRegion = "us-east-1"
	// ObjectStoreImage is versitygw's image, of the version tools/objectstore pins.
	ObjectStoreImage = "versity/versitygw:v1.8.0"
	// Keys of the Secret: the names the operators' credentials default to, so the Secret
	// copied into a cluster's namespace works as it is.
	ObjectStoreAccessKeyKey = "AWS_ACCESS_KEY_ID"
	ObjectStoreSecretKeyKey = "AWS_SECRET_ACCESS_KEY"
)

// ObjectStoreIP is the Service's ClusterIP: the tenth address of the service range
// (127.2.0.10 for instance 0), in the range's low band, which the API server hands out
// only when asked for, so no other Service takes it first.
func (o *Options) ObjectStoreIP() string {
	p, err := netip.ParsePrefix(o.ServiceCIDR)
	if err != nil {
		return ""
	}
	a := p.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a.String()
}

// ObjectStoreEndpoint is the store's URL from the host.
func (o *Options) ObjectStoreEndpoint() string {
	return "http://" + net.JoinHostPort(o.ObjectStoreIP(), strconv.Itoa(ObjectStorePort))
}

// ObjectStoreInClusterEndpoint is the store's URL from pods (the runner resolves it).
const ObjectStoreInClusterEndpoint = "http://objectstore.objectstore.svc:7070"

// objectStoreObjects are the store's objects, Secret aside: namespace, claim, Deployment,
// Service.
func (o *Options) objectStoreObjects() (*corev1.Namespace, *corev1.PersistentVolumeClaim, *appsv1.Deployment, *corev1.Service) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ObjectStoreNamespace}}
	labels := map[string]string{"app.kubernetes.io/name": "versitygw", "app.kubernetes.io/instance": ObjectStoreName}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ObjectStoreNamespace, Name: name, Labels: labels}
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: meta(ObjectStoreName + "-data"),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	}
	key := func(env, k string) corev1.EnvVar {
		return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: ObjectStoreName}, Key: k}}}
	}
	probe := &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(ObjectStorePort)}},
		PeriodSeconds: 5,
	}
	dep := &appsv1.Deployment{
		ObjectMeta: meta(ObjectStoreName),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			// One writer of the claim at a time.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "versitygw",
						Image: ObjectStoreImage,
						// The keys come through the environment, not the command line.
						Args: []string{"--port", fmt.Sprintf(":%d", ObjectStorePort), "--health", "/health",
							"--region", ObjectStoreRegion, "--quiet", "posix", "/data"},
						Env:            []corev1.EnvVar{key("ROOT_ACCESS_KEY_ID", ObjectStoreAccessKeyKey), key("ROOT_SECRET_ACCESS_KEY", ObjectStoreSecretKeyKey)},
						Ports:          []corev1.ContainerPort{{Name: "s3", ContainerPort: ObjectStorePort}},
						ReadinessProbe: probe,
						VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
					}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: meta(ObjectStoreName),
		Spec: corev1.ServiceSpec{
			ClusterIP: o.ObjectStoreIP(),
			Selector:  labels,
			Ports:     []corev1.ServicePort{{Name: "s3", Port: ObjectStorePort, TargetPort: intstr.FromString("s3")}},
		},
	}
	return ns, pvc, dep, svc
}

// objectStoreSecret holds new random root keys, shaped as AWS's: a 20-character access
// key id and a 40-character secret.
func objectStoreSecret() (*corev1.Secret, error) {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz"
	random := func(n int, alphabet string) (string, error) {
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		for i := range b {
			b[i] = alphabet[int(b[i])%len(alphabet)]
		}
		return string(b), nil
	}
	id, err := random(20, alnum[:36])
	if err != nil {
		return nil, err
	}
	secret, err := random(40, alnum)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ObjectStoreNamespace, Name: ObjectStoreName},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{ObjectStoreAccessKeyKey: id, ObjectStoreSecretKeyKey: secret},
	}, nil
}

// ensureObjectStore creates what is missing (an existing Secret keeps its keys, so a
// restart on kept state keeps them and the data), creates the bucket and waits until the
// store answers on its ClusterIP.
func (o *Options) ensureObjectStore(ctx context.Context, client kubernetes.Interface) error {
	ns, pvc, dep, svc := o.objectStoreObjects()
	secret, err := objectStoreSecret()
	if err != nil {
		return err
	}
	steps := []struct {
		what   string
		create func() error
	}{
		{"namespace", func() error {
			_, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
			return err
		}},
		{"Secret", func() error {
			_, err := client.CoreV1().Secrets(ObjectStoreNamespace).Create(ctx, secret, metav1.CreateOptions{})
			return err
		}},
		{"claim", func() error {
			_, err := client.CoreV1().PersistentVolumeClaims(ObjectStoreNamespace).Create(ctx, pvc, metav1.CreateOptions{})
			return err
		}},
		{"Deployment", func() error {
			_, err := client.AppsV1().Deployments(ObjectStoreNamespace).Create(ctx, dep, metav1.CreateOptions{})
			return err
		}},
		{"Service", func() error {
			// Asked for a taken address, the API server answers Invalid before it looks at
			// the name: look first.
			if _, err := client.CoreV1().Services(ObjectStoreNamespace).Get(ctx, svc.Name, metav1.GetOptions{}); err == nil {
				return nil
			}
			_, err := client.CoreV1().Services(ObjectStoreNamespace).Create(ctx, svc, metav1.CreateOptions{})
			return err
		}},
	}
	for _, s := range steps {
		if err := retryCreate(ctx, s.create); err != nil {
			return fmt.Errorf("creating the object store's %s: %w", s.what, err)
		}
	}
	// A bucket of the posix backend is a directory of its root: the claim's directory.
	var bucketDir, phase string
	for bucketDir == "" {
		c, err := client.CoreV1().PersistentVolumeClaims(ObjectStoreNamespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err == nil && c.Status.Phase == corev1.ClaimBound && c.Spec.VolumeName != "" {
			bucketDir = filepath.Join(o.VolumeDir(), c.Spec.VolumeName, ObjectStoreBucket)
			break
		}
		if err == nil {
			phase = string(c.Status.Phase)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the object store's claim %s/%s was not bound (phase %q)", ObjectStoreNamespace, pvc.Name, phase)
		case <-time.After(250 * time.Millisecond):
		}
	}
	if err := os.MkdirAll(bucketDir, 0o755); err != nil {
		return fmt.Errorf("creating the bucket %s: %w", ObjectStoreBucket, err)
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	var last string
	for {
		resp, err := hc.Get(o.ObjectStoreEndpoint() + "/health")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the object store did not answer at %s/health (last: %s); see %s", o.ObjectStoreEndpoint(), last, o.LogDir())
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil
}
