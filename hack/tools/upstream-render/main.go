// Command upstream-render runs Kubeflow Trainer v2.3.0's own object-building code offline, so that the
// objects this project renders can be compared with upstream's, byte for byte where it matters.
//
// It links upstream's packages unmodified (pkg/runtime/core, every plugin of pkg/runtime/framework/plugins,
// pkg/webhooks) against controller-runtime's fake client, which stands in for the API server and the
// manager's cache. Feature gates keep their v2.3.0 defaults (TrainJobStatus off).
//
// Subcommands (input on stdin, output on stdout):
//
//	render        A multi-document YAML (or JSON) stream: exactly one TrainJob, the TrainingRuntimes and
//	              ClusterTrainingRuntimes, and any other object that exists in the cluster (a PriorityClass,
//	              a JobSet, a Secret...), each as the API server stores it: schema defaults applied, and the
//	              metadata (uid, resourceVersion...) the caller wants upstream to see. In order, it runs:
//	              1. each runtime's validating webhook (ValidateCreate of pkg/webhooks);
//	              2. the TrainJob validating webhook: the runtime registry entry named by spec.runtimeRef,
//	                 then its ValidateObjects;
//	              3. what TrainJobReconciler.Reconcile does to build objects: nothing for a TrainJob managed
//	                 by another controller or finished; otherwise NewObjects of the referenced runtime (which
//	                 applies the runtime snapshot ConfigMap itself), then one Apply per returned object.
//	              It prints a JSON array with the body of every Apply, in the order they were sent: each is
//	              `json.Marshal` of the apply configuration, which is what client-go sends
//	              (k8s.io/client-go/util/apply.NewRequest). Warnings go to stderr, prefixed `warning: `.
//	render-variants
//	              The same input, rendered 64 times over (a fresh fake client and runtime registry each
//	              time). Upstream keeps its plugins in a Go map, whose iteration order is random, and some
//	              results depend on that order (PlainML and XGBoost, or PlainML and Flux, both add env vars to
//	              the trainer container: their order in the list varies). It prints a JSON array of the
//	              distinct outcomes, in the order first seen: {"objects": [bodies...]} or {"refusal": "..."};
//	              its exit status is 0 unless this program fails. In 64 runs, an outcome that comes up
//	              one time in three is missed with a chance of about 1 in 10^11.
//	snapshot      One TrainingRuntime or ClusterTrainingRuntime: prints what createRuntimeSnapshot stores
//	              in the snapshot ConfigMap's data.runtime (sigs.k8s.io/yaml.Marshal of the typed object,
//	              apiVersion and kind set, as the manager's cache sets them).
//	json-to-yaml  A JSON document: prints sigs.k8s.io/yaml.JSONToYAML of it.
//
// Exit status: 0 on success; 1 when upstream refuses (a webhook denies an object, or building fails),
// with `admission: ` or `reconcile: ` and upstream's error text on stderr; 2 for a usage error or input
// this program cannot decode into upstream's types.
//
// Not modelled, on purpose:
//   - the API server itself: CRD schema validation, defaulting and CEL rules happen before upstream's code
//     runs, so the input must already be what the API server stores;
//   - the TrainJob mutating webhook (it stamps runtimePatches[].time with the clock; nothing built reads it);
//   - the manager's cache: reads go to the fake client, holding the input objects as given (it sets
//     resourceVersion "999" on an object that has none), with apiVersion and kind set as the cache sets them;
//   - server-side apply: the fake client records each body and stores nothing, so the objects listed are
//     exactly what one first reconcile sends;
//   - field indexes: registered with a no-op indexer, since only the RuntimeClass watch handlers list by
//     them, and no watch runs here;
//   - a plugin order: upstream keeps its plugins in a Go map, so the order of the objects a reconcile
//     applies (after the snapshot ConfigMap), and of some env vars, varies from run to run, here as in the
//     controller (render-variants collects the outcomes);
//   - randomness: the MPI plugin generates a fresh ECDSA key pair for its Secret on every run.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	configapi "github.com/kubeflow/trainer/v2/pkg/apis/config/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/kubeflow/trainer/v2/pkg/runtime"
	"github.com/kubeflow/trainer/v2/pkg/runtime/core"
	"github.com/kubeflow/trainer/v2/pkg/util/trainjob"
	"github.com/kubeflow/trainer/v2/pkg/webhooks"
)

// errRefused marks an error that is upstream's verdict on the input (exit status 1), not a harness failure.
type errRefused struct {
	phase string
	err   error
}

func (e errRefused) Error() string { return e.phase + ": " + e.err.Error() }

func main() {
	// controller-runtime warns on stderr when its logger is used before being set; upstream logs nothing
	// that matters here.
	ctrllog.SetLogger(logr.Discard())
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: upstream-render render|render-variants|snapshot|json-to-yaml < input")
		os.Exit(2)
	}
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var out []byte
	switch os.Args[1] {
	case "render":
		out, err = render(input, os.Stderr)
	case "render-variants":
		out, err = renderVariants(input)
	case "snapshot":
		out, err = snapshot(input)
	case "json-to-yaml":
		out, err = yaml.JSONToYAML(input)
	default:
		err = fmt.Errorf("unknown subcommand %q (render, render-variants, snapshot, json-to-yaml)", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
	os.Stdout.Write(out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	var refused errRefused
	if errors.As(err, &refused) {
		os.Exit(1)
	}
	os.Exit(2)
}

// newScheme holds every type upstream's manager reads or writes: the built-in kinds, Trainer, JobSet and
// the two PodGroup kinds.
func newScheme() *apiruntime.Scheme {
	scheme := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(trainer.AddToScheme(scheme))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))
	utilruntime.Must(volcanov1beta1.AddToScheme(scheme))
	return scheme
}

// decodeAll splits a YAML or JSON stream into documents and decodes each into its registered Go type, as
// client-go decodes an API response (unknown fields dropped, no defaulting); empty documents are skipped.
func decodeAll(scheme *apiruntime.Scheme, input []byte) ([]client.Object, error) {
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(input)))
	var objects []client.Object
	for index := 1; ; index++ {
		document, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objects, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", index, err)
		}
		data, err := yaml.YAMLToJSON(document)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", index, err)
		}
		if trimmed := bytes.TrimSpace(data); len(trimmed) == 0 || string(trimmed) == "null" {
			continue
		}
		decoded, gvk, err := decoder.Decode(data, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", index, err)
		}
		object, ok := decoded.(client.Object)
		if !ok {
			return nil, fmt.Errorf("document %d: %s is not an object with metadata", index, gvk)
		}
		object.GetObjectKind().SetGroupVersionKind(*gvk)
		objects = append(objects, object)
	}
}

// noIndexer accepts field index registrations and serves none (see the package comment).
type noIndexer struct{}

func (noIndexer) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

// render: see the package comment. Warnings go to warnings.
func render(input []byte, warnings io.Writer) ([]byte, error) {
	ctx := context.Background()
	scheme := newScheme()
	objects, err := decodeAll(scheme, input)
	if err != nil {
		return nil, err
	}
	var trainJob *trainer.TrainJob
	var stored []client.Object
	for _, object := range objects {
		switch typed := object.(type) {
		case *trainer.TrainJob:
			if trainJob != nil {
				return nil, errors.New("more than one TrainJob in the input")
			}
			trainJob = typed
			continue
		case *trainer.TrainingRuntime:
			denied, err := (&webhooks.TrainingRuntimeValidator{}).ValidateCreate(ctx, typed)
			warn(warnings, denied)
			if err != nil {
				return nil, errRefused{"admission", fmt.Errorf("TrainingRuntime %s: %w", typed.Name, err)}
			}
		case *trainer.ClusterTrainingRuntime:
			denied, err := (&webhooks.ClusterTrainingRuntimeValidator{}).ValidateCreate(ctx, typed)
			warn(warnings, denied)
			if err != nil {
				return nil, errRefused{"admission", fmt.Errorf("ClusterTrainingRuntime %s: %w", typed.Name, err)}
			}
		}
		stored = append(stored, object)
	}
	if trainJob == nil {
		return nil, errors.New("no TrainJob in the input")
	}

	// Every Apply is recorded as the JSON body client-go would send, and goes no further.
	var bodies []json.RawMessage
	record := func(_ context.Context, _ client.WithWatch, obj apiruntime.ApplyConfiguration, _ ...client.ApplyOption) error {
		body, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		bodies = append(bodies, body)
		return nil
	}
	// The manager reads through its cache, which sets apiVersion and kind on every typed object it returns
	// (createRuntimeSnapshot writes them into the snapshot); the fake client clears them, so Get sets them.
	get := func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return err
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		return nil
	}
	c := fake.NewClientBuilder().
		WithScheme(scheme).
		WithObjects(stored...).
		WithInterceptorFuncs(interceptor.Funcs{Get: get, Apply: record}).
		Build()
	// The manager's runtime registry, as cmd/trainer-controller-manager builds it (its configuration is
	// read only by the TrainJobStatus plugin, which is off by default).
	runtimes, err := core.New(ctx, c, noIndexer{}, &configapi.Configuration{})
	if err != nil {
		return nil, err
	}

	// The TrainJob validating webhook (TrainJobValidator.ValidateCreate).
	key := runtime.RuntimeRefToRuntimeRegistryKey(trainJob.Spec.RuntimeRef)
	registered, ok := runtimes[key]
	if !ok {
		return nil, errRefused{"admission", fmt.Errorf("unsupported runtime: %s", key)}
	}
	said, errs := registered.ValidateObjects(ctx, nil, trainJob)
	warn(warnings, said)
	if err := errs.ToAggregate(); err != nil {
		return nil, errRefused{"admission", err}
	}

	// TrainJobReconciler.Reconcile and reconcileObjects, up to the applies.
	if trainjob.IsManagedByExternalController(trainJob) || trainjob.IsTrainJobFinished(trainJob) {
		return []byte("[]\n"), nil
	}
	built, err := newObjects(ctx, registered, trainJob)
	if err != nil {
		return nil, errRefused{"reconcile", err}
	}
	for _, object := range built {
		if err := c.Apply(ctx, object, client.FieldOwner("trainer"), client.ForceOwnership); err != nil {
			return nil, err
		}
	}
	if bodies == nil {
		bodies = []json.RawMessage{}
	}
	out, err := json.Marshal(bodies)
	return append(out, '\n'), err
}

// newObjects is the runtime's NewObjects, with a panic turned into an error: controller-runtime recovers a
// panicking Reconcile (RecoverPanic defaults to true) and returns it as an error, so nothing is applied.
func newObjects(ctx context.Context, r runtime.Runtime, trainJob *trainer.TrainJob) (built []apiruntime.ApplyConfiguration, err error) {
	defer func() {
		if p := recover(); p != nil {
			built, err = nil, fmt.Errorf("panic: %v [recovered]", p)
		}
	}()
	return r.NewObjects(ctx, trainJob)
}

// snapshot: see the package comment.
func snapshot(input []byte) ([]byte, error) {
	objects, err := decodeAll(newScheme(), input)
	if err != nil {
		return nil, err
	}
	if len(objects) != 1 {
		return nil, fmt.Errorf("want exactly one runtime, got %d documents", len(objects))
	}
	switch objects[0].(type) {
	case *trainer.TrainingRuntime, *trainer.ClusterTrainingRuntime:
		return yaml.Marshal(objects[0])
	default:
		return nil, fmt.Errorf("want a TrainingRuntime or ClusterTrainingRuntime, got %s",
			objects[0].GetObjectKind().GroupVersionKind().Kind)
	}
}

func warn(to io.Writer, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintln(to, "warning: "+w)
	}
}

// variantRuns is how many times render-variants renders its input.
const variantRuns = 64

// renderVariants: see the package comment.
func renderVariants(input []byte) ([]byte, error) {
	type outcome struct {
		Objects json.RawMessage `json:"objects,omitempty"`
		Refusal string          `json:"refusal,omitempty"`
	}
	var outcomes []outcome
	seen := map[string]bool{}
	for range variantRuns {
		var o outcome
		bodies, err := render(input, io.Discard)
		var refused errRefused
		switch {
		case errors.As(err, &refused):
			o.Refusal = refused.Error()
		case err != nil:
			return nil, err
		default:
			o.Objects = bodies
		}
		key, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		if !seen[string(key)] {
			seen[string(key)] = true
			outcomes = append(outcomes, o)
		}
	}
	out, err := json.Marshal(outcomes)
	return append(out, '\n'), err
}
