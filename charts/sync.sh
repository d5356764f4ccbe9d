#!/usr/bin/env bash
# sync.sh copies what the charts ship from its generated sources, so the charts never drift
# from the API types and the RBAC markers:
#   deploy/crds/<group>_<plural>.yaml  -> charts/<service>/crds/
#       (except vald.vdaas.org_valdreleases.yaml: the ValdRelease CRD belongs to the Vald Helm
#        Operator, so it goes to charts/vald-operator/files/crds/ and is installed only when
#        the value installValdReleaseCRD asks)
#   deploy/rbac/<service>/role.yaml    -> charts/<service>/files/role.yaml
#       (the library's opsuite-lib.rbac turns its ClusterRole rules into the controller's
#        ClusterRole)
#   charts/opsuite-lib/                -> charts/<operator>/charts/opsuite-lib/, charts/node-agent/charts/opsuite-lib/
#       (the library chart of the operators' common templates, vendored as a committed copy so
#        that a plain clone installs, lints and packages each chart without
#        `helm dependency build`; each chart's Chart.yaml declares it without a repository)
# `make generate` runs it after controller-gen. With --check it changes nothing and fails when
# a chart is stale, naming the files (for CI and `make lint`).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
check=false
case "${1:-}" in
  --check) check=true ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

declare -A service_of=(
  [vald.vdaas.org]=vald-operator
  [veltrix.io]=veltrix-operator
  [valkey.io]=valkey-operator
  [memgraph.com]=memgraph-operator
)
services=(vald-operator veltrix-operator valkey-operator memgraph-operator)
# The charts that vendor the library: the operators and the node agent.
lib_charts=("${services[@]}" node-agent)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

shopt -s nullglob
crds=("$root"/deploy/crds/*.yaml)
if ((${#crds[@]} == 0)); then
  echo "sync.sh: no CRDs in deploy/crds; run controller-gen first (make generate)" >&2
  exit 1
fi

declare -A plurals=()
for crd in "${crds[@]}"; do
  file=$(basename "$crd")
  group=${file%%_*}
  plural=${file#*_}
  plural=${plural%.yaml}
  svc=${service_of[$group]:-}
  if [[ -z $svc ]]; then
    echo "sync.sh: $file: group $group belongs to no chart; add it to service_of" >&2
    exit 1
  fi
  plurals[$svc]+=" $plural"
  if [[ $file == vald.vdaas.org_valdreleases.yaml ]]; then
    mkdir -p "$out/$svc/files/crds"
    cp "$crd" "$out/$svc/files/crds/$file"
  else
    mkdir -p "$out/$svc/crds"
    cp "$crd" "$out/$svc/crds/$file"
  fi
done

for svc in "${services[@]}"; do
  mkdir -p "$out/$svc/files" "$out/$svc/crds"
  role=$root/deploy/rbac/$svc/role.yaml
  if [[ -f $role ]]; then
    cp "$role" "$out/$svc/files/role.yaml"
    continue
  fi
  # No markers yet: the controller may only read its own kinds until its engineers add
  # +kubebuilder:rbac markers and `make generate` writes deploy/rbac/<service>/role.yaml.
  echo "sync.sh: warning: $role is missing; $svc gets a placeholder ClusterRole" >&2
  group=""
  for g in "${!service_of[@]}"; do [[ ${service_of[$g]} == "$svc" ]] && group=$g; done
  {
    echo "# PLACEHOLDER written by charts/sync.sh: deploy/rbac/$svc/role.yaml does not exist yet."
    echo "# It is replaced by controller-gen's output once the controller has +kubebuilder:rbac markers."
    echo "---"
    echo "apiVersion: rbac.authorization.k8s.io/v1"
    echo "kind: ClusterRole"
    echo "metadata:"
    echo "  name: manager-role"
    echo "rules:"
    echo "- apiGroups:"
    echo "  - $group"
    echo "  resources:"
    for p in ${plurals[$svc]:-}; do
      [[ $p == valdreleases ]] || echo "  - $p"
    done
    echo "  verbs:"
    echo "  - get"
    echo "  - list"
    echo "  - watch"
  } >"$out/$svc/files/role.yaml"
done

# The vendored library: a copy of charts/opsuite-lib in every chart of lib_charts, whose
# Chart.yaml must ask for the library's version.
lib=$root/charts/opsuite-lib
lib_version=$(sed -n 's/^version:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$/\1/p' "$lib/Chart.yaml")
if [[ -z $lib_version ]]; then
  echo "sync.sh: charts/opsuite-lib/Chart.yaml has no version" >&2
  exit 1
fi
for svc in "${lib_charts[@]}"; do
  mkdir -p "$out/$svc/charts"
  cp -r "$lib" "$out/$svc/charts/opsuite-lib"
  # The dependency entry: "- name: opsuite-lib" followed by its version line.
  want_version=$(awk '/^dependencies:/ {d=1; next} d && /^[^ #-]/ {d=0}
    d && /-[[:space:]]+name:[[:space:]]*opsuite-lib[[:space:]]*$/ {n=1; next}
    d && n && /version:/ {sub(/.*version:[[:space:]]*/, ""); gsub(/"/, ""); print; exit}' "$root/charts/$svc/Chart.yaml")
  if [[ $want_version != "$lib_version" ]]; then
    echo "sync.sh: charts/$svc/Chart.yaml asks for opsuite-lib ${want_version:-(none)}, charts/opsuite-lib is $lib_version; update its dependencies" >&2
    exit 1
  fi
done

# Compare or install every generated path; generated directories are owned by this script,
# so files that no longer have a source are removed.
stale=()
for svc in "${lib_charts[@]}"; do
  want=$out/$svc/charts/opsuite-lib have=$root/charts/$svc/charts/opsuite-lib
  if ! diff -r -q "$want" "$have" >/dev/null 2>&1; then
    stale+=("charts/$svc/charts/opsuite-lib/")
    if ! $check; then
      rm -rf "$have"
      mkdir -p "$(dirname "$have")"
      cp -r "$want" "$have"
    fi
  fi
done
for svc in "${services[@]}"; do
  for dir in crds files/crds; do
    want=$out/$svc/$dir have=$root/charts/$svc/$dir
    [[ -d $want || -d $have ]] || continue
    mkdir -p "$want"
    if ! diff -r -q "$want" "$have" >/dev/null 2>&1; then
      stale+=("charts/$svc/$dir/")
      if ! $check; then
        rm -rf "$have"
        mkdir -p "$(dirname "$have")"
        cp -r "$want" "$have"
      fi
    fi
  done
  want=$out/$svc/files/role.yaml have=$root/charts/$svc/files/role.yaml
  if ! cmp -s "$want" "$have"; then
    stale+=("charts/$svc/files/role.yaml")
    if ! $check; then
      mkdir -p "$(dirname "$have")"
      cp "$want" "$have"
    fi
  fi
done

if ((${#stale[@]} > 0)); then
  if $check; then
    echo "sync.sh: charts are stale, run 'make generate' (or charts/sync.sh):" >&2
    printf '  %s\n' "${stale[@]}" >&2
    exit 1
  fi
  printf 'sync.sh: updated %s\n' "${stale[@]}"
fi
