// Command gotypes describes, for Python, how Go's encoding/json writes the API types upstream
// Kubeflow Trainer v2.3.0 serializes, and replays that serialization for tests.
//
//	gotypes table        write the type table (runtime/api/gotypes.json) to stdout
//	gotypes roundtrip    read JSON lines {"type": T, "mode": M, "value": V} from stdin, write one line
//	                     {"value": W} or {"error": E} per input line, where W is V after:
//	                       mode "json":     json.Marshal(decode(V into T)), the decoder client-go uses;
//	                       mode "template": upstream's apply.FromTypedObjWithFields of a JobSet whose spec
//	                                        is decode(V into jobset v1alpha2 JobSetSpec), then json.Marshal
//	                                        of the JobSetSpecApplyConfiguration it returns (T is ignored).
//
// The table names every struct reachable from the roots below by reflection. A type is written as a
// string: a struct's table name ("core/v1.Container"), "*T", "[]T", "map[string]T", a scalar kind
// ("string", "bool", "int32", "float64", ...), "any", "bytes", or the name of a type with its own JSON
// marshaller ("Quantity", "Time", "MicroTime", "IntOrString", "FieldsV1"); any other type with its own
// JSON form, or an IsZero method, or an embedded pointer to a struct, stops the generator.
// A field is [json name, flags, type]; flags hold "o" (omitempty), "z" (omitzero) and "i" (an embedded
// struct whose fields are inlined; the name is then empty).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/kubeflow/trainer/v2/pkg/apply"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetv1alpha2ac "sigs.k8s.io/jobset/client-go/applyconfiguration/jobset/v1alpha2"
	sigsjson "sigs.k8s.io/json"
	schedulerpluginsac "sigs.k8s.io/scheduler-plugins/pkg/generated/applyconfiguration/scheduling/v1alpha1"
	volcanoac "volcano.sh/apis/pkg/client/applyconfiguration/scheduling/v1beta1"
)

// roots are the types upstream decodes, writes or builds as apply configurations.
var roots = []reflect.Type{
	reflect.TypeFor[trainer.TrainJob](),
	reflect.TypeFor[trainer.TrainingRuntime](),
	reflect.TypeFor[trainer.ClusterTrainingRuntime](),
	reflect.TypeFor[jobsetv1alpha2.JobSet](),
	reflect.TypeFor[jobsetv1alpha2ac.JobSetApplyConfiguration](),
	reflect.TypeFor[corev1ac.ConfigMapApplyConfiguration](),
	reflect.TypeFor[corev1ac.SecretApplyConfiguration](),
	reflect.TypeFor[schedulerpluginsac.PodGroupApplyConfiguration](),
	reflect.TypeFor[volcanoac.PodGroupApplyConfiguration](),
}

// marshallers are the types with their own JSON form, by the name the table gives them.
var marshallers = map[reflect.Type]string{
	reflect.TypeFor[resource.Quantity]():  "Quantity",
	reflect.TypeFor[metav1.Time]():        "Time",
	reflect.TypeFor[metav1.MicroTime]():   "MicroTime",
	reflect.TypeFor[intstr.IntOrString](): "IntOrString",
	reflect.TypeFor[metav1.FieldsV1]():    "FieldsV1",
}

// prefixes shorten package paths into table names; the longest match wins.
var prefixes = [][2]string{
	{"k8s.io/api/", ""},
	{"k8s.io/apimachinery/pkg/apis/", ""},
	{"k8s.io/client-go/applyconfigurations/", "ac/"},
	{"sigs.k8s.io/jobset/api/", ""},
	{"sigs.k8s.io/jobset/client-go/applyconfiguration/", "ac/"},
	{"github.com/kubeflow/trainer/v2/pkg/apis/", ""},
	{"sigs.k8s.io/scheduler-plugins/apis/", "scheduler-plugins/"},
	{"sigs.k8s.io/scheduler-plugins/pkg/generated/applyconfiguration/", "ac/scheduler-plugins/"},
	{"volcano.sh/apis/pkg/apis/", "volcano/"},
	{"volcano.sh/apis/pkg/client/applyconfiguration/", "ac/volcano/"},
}

var (
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	isZeroer        = reflect.TypeFor[interface{ IsZero() bool }]()
	textMarshaler   = reflect.TypeFor[interface{ MarshalText() ([]byte, error) }]()
)

type walker struct {
	structs map[string][]any
	types   map[string]reflect.Type
	owner   map[string]reflect.Type
}

func structName(t reflect.Type) string {
	path, best := t.PkgPath(), -1
	short := path
	for _, p := range prefixes {
		if strings.HasPrefix(path, p[0]) && len(p[0]) > best {
			best, short = len(p[0]), p[1]+strings.TrimPrefix(path, p[0])
		}
	}
	return short + "." + t.Name()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gotypes: "+format+"\n", args...)
	os.Exit(1)
}

// typeName is the table's name for t, walking any struct it names.
func (w *walker) typeName(t reflect.Type) string {
	if name, ok := marshallers[t]; ok {
		return name
	}
	for _, own := range []reflect.Type{t, reflect.PointerTo(t)} {
		if t.Kind() != reflect.Pointer && (own.Implements(jsonMarshaler) || own.Implements(jsonUnmarshaler) ||
			own.Implements(textMarshaler)) {
			fail("%s has its own JSON form the table does not know", t)
		}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + w.typeName(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes"
		}
		return "[]" + w.typeName(t.Elem())
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			fail("%s: map keys of kind %s", t, t.Key().Kind())
		}
		return "map[string]" + w.typeName(t.Elem())
	case reflect.Interface:
		return "any"
	case reflect.Struct:
		w.walk(t)
		return structName(t)
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if t.Implements(isZeroer) || reflect.PointerTo(t).Implements(isZeroer) {
			fail("%s has an IsZero method the table does not know", t)
		}
		return t.Kind().String()
	}
	fail("%s: unsupported kind %s", t, t.Kind())
	return ""
}

func (w *walker) walk(t reflect.Type) {
	name := structName(t)
	if prev, ok := w.owner[name]; ok {
		if prev != t {
			fail("two types named %s: %s and %s", name, prev, t)
		}
		return
	}
	if t.Implements(isZeroer) || reflect.PointerTo(t).Implements(isZeroer) {
		fail("%s has an IsZero method the table does not know", t)
	}
	w.owner[name] = t
	w.types[name] = t
	fields := []any{}
	w.structs[name] = fields
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		parts := strings.Split(tag, ",")
		jsonName, flags := parts[0], ""
		for _, opt := range parts[1:] {
			switch opt {
			case "omitempty":
				flags += "o"
			case "omitzero":
				flags += "z"
			case "inline", "string", "":
			default:
				fail("%s.%s: json option %q", t, f.Name, opt)
			}
			if opt == "string" {
				fail("%s.%s: json option \"string\"", t, f.Name)
			}
		}
		ft := f.Type
		if f.Anonymous && jsonName == "" {
			if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
				fail("%s.%s: an embedded pointer to a struct", t, f.Name)
			}
			if ft.Kind() == reflect.Struct {
				if _, custom := marshallers[ft]; !custom {
					flags += "i"
				}
			}
			if !strings.Contains(flags, "i") {
				jsonName = ft.Name()
			}
		} else if jsonName == "" {
			jsonName = f.Name
		}
		if !f.IsExported() && !strings.Contains(flags, "i") {
			continue
		}
		fields = append(fields, []any{jsonName, flags, w.typeName(ft)})
	}
	w.structs[name] = fields
}

func newWalker() *walker {
	w := &walker{structs: map[string][]any{}, types: map[string]reflect.Type{}, owner: map[string]reflect.Type{}}
	for _, t := range roots {
		w.walk(t)
	}
	return w
}

func writeTable(w *walker) {
	names := make([]string, 0, len(w.structs))
	for name := range w.structs {
		names = append(names, name)
	}
	sort.Strings(names)
	rootNames := make([]string, 0, len(roots))
	for _, t := range roots {
		rootNames = append(rootNames, structName(t))
	}
	var out bytes.Buffer
	out.WriteString("{\n")
	line, _ := json.Marshal(rootNames)
	fmt.Fprintf(&out, "%q: %s,\n", "roots", line)
	out.WriteString("\"structs\": {\n")
	for i, name := range names {
		line, err := json.Marshal(w.structs[name])
		if err != nil {
			fail("%v", err)
		}
		sep := ","
		if i == len(names)-1 {
			sep = ""
		}
		fmt.Fprintf(&out, "%q: %s%s\n", name, line, sep)
	}
	out.WriteString("}\n}\n")
	os.Stdout.Write(out.Bytes())
}

type request struct {
	Type  string          `json:"type"`
	Mode  string          `json:"mode"`
	Value json.RawMessage `json:"value"`
}

func roundTrip(w *walker, req request) (any, error) {
	switch req.Mode {
	case "json":
		t, ok := w.types[req.Type]
		if !ok {
			return nil, fmt.Errorf("unknown type %q", req.Type)
		}
		ptr := reflect.New(t)
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Value, ptr.Interface()); err != nil {
			return nil, err
		}
		return ptr.Interface(), nil
	case "template":
		var spec jobsetv1alpha2.JobSetSpec
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Value, &spec); err != nil {
			return nil, err
		}
		return apply.FromTypedObjWithFields[jobsetv1alpha2ac.JobSetSpecApplyConfiguration](&jobsetv1alpha2.JobSet{
			TypeMeta: metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
			Spec:     spec,
		}, "spec")
	}
	return nil, fmt.Errorf("unknown mode %q", req.Mode)
}

func serve(w *walker) {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		var req request
		var reply map[string]any
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			reply = map[string]any{"error": err.Error()}
		} else if v, err := roundTrip(w, req); err != nil {
			reply = map[string]any{"error": err.Error()}
		} else {
			reply = map[string]any{"value": v}
		}
		line, err := json.Marshal(reply)
		if err != nil {
			line, _ = json.Marshal(map[string]any{"error": err.Error()})
		}
		out.Write(append(line, '\n'))
	}
	if err := in.Err(); err != nil {
		fail("reading stdin: %v", err)
	}
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: gotypes table|roundtrip")
	}
	w := newWalker()
	switch os.Args[1] {
	case "table":
		writeTable(w)
	case "roundtrip":
		serve(w)
	default:
		fail("unknown command %q", os.Args[1])
	}
}
