//go:build tools

// Package deps names the packages that upstream's e2e suite (github.com/kubeflow/trainer/v2/test/e2e, a
// package of _test.go files only) imports, so that `go mod tidy` pins them in this wrapper's go.mod and
// go.sum; hack/build-binaries.sh compiles that package from the module cache with `go test -c`. Nothing
// here is built: the build tag keeps this file out of every build.
package deps

import (
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "k8s.io/api/batch/v1"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/utils/ptr"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
	_ "sigs.k8s.io/controller-runtime/pkg/client/config"
	_ "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	_ "sigs.k8s.io/jobset/pkg/constants"

	_ "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	_ "github.com/kubeflow/trainer/v2/pkg/constants"
	_ "github.com/kubeflow/trainer/v2/pkg/util/testing"
	_ "github.com/kubeflow/trainer/v2/test/util"
)
