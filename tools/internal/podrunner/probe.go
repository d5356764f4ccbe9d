package podrunner

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probe runs one probe attempt against the pod's address. Exec probes cannot run inside
// an image we do not have; they pass while the process runs.
func probe(ctx context.Context, p *corev1.Probe, podIP string, c *corev1.Container) error {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		h := p.HTTPGet
		port, err := resolvePort(h.Port, c)
		if err != nil {
			return err
		}
		host := podIP
		if h.Host != "" {
			host = h.Host
		}
		scheme := "http"
		if h.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		path := h.Path
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), path)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		for _, hd := range h.HTTPHeaders {
			req.Header.Set(hd.Name, hd.Value)
		}
		client := &http.Client{Transport: &http.Transport{
			Proxy:           nil,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet probes skip verification too
		}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP probe answered %d", resp.StatusCode)
		}
		return nil
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, c)
		if err != nil {
			return err
		}
		host := podIP
		if p.TCPSocket.Host != "" {
			host = p.TCPSocket.Host
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case p.GRPC != nil:
		conn, err := grpc.NewClient(net.JoinHostPort(podIP, strconv.Itoa(int(p.GRPC.Port))),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			return err
		}
		if resp.Status != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("gRPC health is %s", resp.Status)
		}
		return nil
	}
	return nil
}

func resolvePort(port intstr.IntOrString, c *corev1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, port.StrVal)
}

func (w *podWorker) probeContainer(pod *corev1.Pod, c *container) {
	now := time.Now()
	if rp := c.spec.ReadinessProbe; rp != nil {
		if now.Sub(c.probeStart) >= time.Duration(rp.InitialDelaySeconds)*time.Second &&
			now.Sub(c.lastProbe) >= period(rp) {
			c.lastProbe = now
			err := probe(w.ctx, rp, pod.Status.PodIP, &c.spec)
			if err == nil {
				c.readyFail = 0
				c.readyOK++
				if c.readyOK >= max(rp.SuccessThreshold, 1) {
					c.ready = true
				}
			} else {
				c.readyOK = 0
				c.readyFail++
				if c.readyFail >= threshold(rp.FailureThreshold) || !c.ready {
					c.ready = false
				}
			}
		}
	} else {
		c.ready = true
	}
	if lp := c.spec.LivenessProbe; lp != nil {
		if now.Sub(c.probeStart) >= time.Duration(lp.InitialDelaySeconds)*time.Second &&
			now.Sub(c.lastLive) >= period(lp) {
			c.lastLive = now
			if err := probe(w.ctx, lp, pod.Status.PodIP, &c.spec); err != nil {
				c.liveFail++
				if c.liveFail >= threshold(lp.FailureThreshold) {
					w.r.log.Info("Liveness probe failed; killed the container", "pod", w.key, "container", c.spec.Name, "err", err)
					_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
				}
			} else {
				c.liveFail = 0
			}
		}
	}
}

func period(p *corev1.Probe) time.Duration {
	if p.PeriodSeconds <= 0 {
		return 10 * time.Second
	}
	return time.Duration(p.PeriodSeconds) * time.Second
}

func threshold(t int32) int32 {
	if t <= 0 {
		return 3
	}
	return t
}
