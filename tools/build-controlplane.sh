#!/usr/bin/env bash
# Builds the control-plane binaries for tests and the local cluster from the Go module
# proxy, once per version, into .cache/k8s/<version>/: kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl from tools/k8s, etcd from tools/etcd.
# A second run finds them and builds nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=v1.37.2
out="$root/.cache/k8s/$k8s_version"
mkdir -p "$out"

# The version ldflags matter: without them the binaries report v0.0.0-master, which breaks
# Helm's kubeVersion checks.
minor=${k8s_version#v1.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version"

missing=()
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  [ -x "$out/$cmd" ] || missing+=("k8s.io/kubernetes/cmd/$cmd")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "building ${missing[*]##*/} $k8s_version into $out (about 8 minutes cold on 2 cores)"
  start=$SECONDS
  (cd "$root/tools/k8s" && GOWORK=off go build -trimpath -ldflags "$ldflags" -o "$out/" "${missing[@]}")
  echo "built in $((SECONDS - start))s"
fi
if [ ! -x "$out/etcd" ]; then
  echo "building etcd into $out"
  start=$SECONDS
  (cd "$root/tools/etcd" && GOWORK=off go build -trimpath -ldflags "-s -w" -o "$out/etcd" .)
  echo "built in $((SECONDS - start))s"
fi
"$out/kube-apiserver" --version
# sed reads all of it: head exiting first could kill etcd with SIGPIPE and fail the pipeline.
"$out/etcd" --version | sed -n 1p
