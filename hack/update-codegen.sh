#!/usr/bin/env bash
# Regenerates everything derived from api/: deepcopy functions, the CRD, the
# typed clientset, listers and informers under pkg/generated and the API
# reference docs/api.md; the chart's copies of the CRD and of
# examples/monitoring, and the kustomize base's copy of the CRD. Runs from
# any checkout location: generators get import paths, never GOPATH-relative
# ones.
set -euo pipefail
cd "$(dirname "$0")/.."

module="$(go list -m)"
boilerplate="hack/boilerplate.go.txt"
apis=("${module}/api/v1alpha1")
out="pkg/generated"

# Generated trees are rebuilt from scratch so a removed type leaves no file behind.
rm -rf "${out}"
rm -f crds/*.yaml api/*/zz_generated.deepcopy.go

go tool controller-gen \
	object:headerFile="${boilerplate}" \
	crd output:crd:dir=crds \
	paths=./api/...

# The Helm chart ships the same CRD (Helm installs crds/ of a chart as is),
# and so does the kustomize base of examples/, as kustomize reads no file
# from outside its folder.
for copy in charts/provfleet/crds examples/crds; do
	rm -f "${copy}"/*.yaml
	cp crds/*.yaml "${copy}/"
done

# It ships the dashboard and alerts of examples/monitoring too: those stay the
# one source, whole objects to import or kubectl apply without Helm, and a
# chart reads only files inside its own folder.
rm -rf charts/provfleet/files/monitoring
mkdir -p charts/provfleet/files/monitoring
cp examples/monitoring/dashboard.json examples/monitoring/prometheusrule.yaml charts/provfleet/files/monitoring/

go tool client-gen \
	--go-header-file "${boilerplate}" \
	--input-base "${module}" \
	--input "api/v1alpha1" \
	--clientset-name versioned \
	--output-dir "${out}/clientset" \
	--output-pkg "${module}/${out}/clientset"

go tool lister-gen \
	--go-header-file "${boilerplate}" \
	--output-dir "${out}/listers" \
	--output-pkg "${module}/${out}/listers" \
	"${apis[@]}"

go tool informer-gen \
	--go-header-file "${boilerplate}" \
	--versioned-clientset-package "${module}/${out}/clientset/versioned" \
	--listers-package "${module}/${out}/listers" \
	--output-dir "${out}/informers" \
	--output-pkg "${module}/${out}/informers" \
	"${apis[@]}"

# The API reference, from the CRD just written.
go run ./hack/apidocs -out docs/api.md crds/*.yaml
