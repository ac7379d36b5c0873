module github.com/kubeflow-trainer-py/hack/tools/crds

go 1.26.0

require (
	github.com/kubeflow/trainer/v2 v2.3.0
	sigs.k8s.io/jobset v0.12.0
	sigs.k8s.io/scheduler-plugins v0.34.7
	volcano.sh/volcano v1.10.0
)
