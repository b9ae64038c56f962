/*
Copyright The provfleet Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package provisioning_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/provfleet/provfleet/internal/polltest"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

const (
	// waitTimeout bounds every wait for the control plane or a controller.
	waitTimeout = 90 * time.Second
	// eventComponent is the Event source of the controllers under test.
	eventComponent = "provfleet-e2e"
)

func TestMain(m *testing.M) {
	// A short binder resync: a claim whose class appears later is noticed
	// by the binder only on resync.
	os.Exit(testenv.RunMain(m, testenv.Options{PVClaimBinderSyncPeriod: 2 * time.Second}))
}

var (
	managerConfigOnce sync.Once
	managerConfig     *rest.Config
	managerConfigErr  error
)

// controllerConfig authenticates as the manager's ServiceAccount, so the
// controllers under test have only the RBAC the project ships.
func controllerConfig(t *testing.T) *rest.Config {
	t.Helper()
	env := testenv.Env(t)
	managerConfigOnce.Do(func() {
		root, err := testenv.RepoRoot()
		if err != nil {
			managerConfigErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		managerConfig, managerConfigErr = env.ManagerServiceAccountConfig(ctx, root,
			filepath.Join(root, "examples", "deploy", "legacy-lock-rbac.yaml"))
	})
	if managerConfigErr != nil {
		t.Fatal(managerConfigErr)
	}
	return rest.CopyConfig(managerConfig)
}

// fixture is one test's slice of the cluster: its namespace, its provisioner
// name and StorageClass, and an admin client that plays users and scheduler.
type fixture struct {
	t           *testing.T
	admin       kubernetes.Interface
	namespace   string
	provisioner string
	class       string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.Env(t)
	admin, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	ns, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return &fixture{
		t:           t,
		admin:       admin,
		namespace:   ns.Name,
		provisioner: "e2e.provfleet.io/" + ns.Name,
		class:       ns.Name,
	}
}

// config returns a controller configuration with short delays and without
// leader election.
func (f *fixture) config() provisioning.Config {
	cfg := provisioning.DefaultConfig(f.provisioner)
	cfg.Workers = 2
	cfg.LeaderElection.Enabled = false
	cfg.Retry.InitialDelay = 200 * time.Millisecond
	cfg.Retry.MaxDelay = 2 * time.Second
	cfg.VolumeSave.Interval = 200 * time.Millisecond
	return cfg
}

// instance is one running controller with its own clients and informers, as
// one manager process would have.
type instance struct {
	controller *provisioning.Controller
	stopOnce   sync.Once
	cancel     context.CancelFunc
	done       chan error
	// release shuts down what the controller used once Run returned.
	release func()
}

// start runs a controller for backend until stop or the end of the test; opts
// shape its informers.
func (f *fixture) start(cfg provisioning.Config, backend provisioning.Provisioner, opts ...informers.SharedInformerOption) *instance {
	f.t.Helper()
	config := controllerConfig(f.t)
	config.UserAgent = "provfleet-e2e/" + cfg.LeaderElection.Identity
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		f.t.Fatal(err)
	}
	logger := ktesting.NewLogger(f.t, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	metrics, err := provisioning.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		f.t.Fatal(err)
	}
	controller, err := provisioning.New(cfg, provisioning.Dependencies{
		Client: client,
		Informers: provisioning.SharedInformers{
			Claims:  factory.Core().V1().PersistentVolumeClaims().Informer(),
			Volumes: factory.Core().V1().PersistentVolumes().Informer(),
			Classes: factory.Storage().V1().StorageClasses().Informer(),
			Nodes:   factory.Core().V1().Nodes().Informer(),
		},
		EventRecorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: eventComponent}),
		Metrics:       metrics,
		Provisioner:   backend,
	})
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	factory.Start(ctx.Done())
	in := &instance{
		controller: controller,
		cancel:     cancel,
		done:       make(chan error, 1),
		release: func() {
			factory.Shutdown()
			broadcaster.Shutdown()
		},
	}
	go func() { in.done <- controller.Run(ctx) }()
	f.t.Cleanup(func() { in.stop(f.t) })
	return in
}

// stop cancels the controller and waits until Run returned.
func (in *instance) stop(t *testing.T) {
	t.Helper()
	in.stopOnce.Do(func() {
		in.cancel()
		select {
		case err := <-in.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("Run did not return within %v of its context ending", waitTimeout)
			return
		}
		in.release()
	})
}

func (f *fixture) createClass(name string, mutate func(*storagev1.StorageClass)) *storagev1.StorageClass {
	f.t.Helper()
	class := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: name},
		Provisioner: f.provisioner,
	}
	if mutate != nil {
		mutate(class)
	}
	created, err := f.admin.StorageV1().StorageClasses().Create(f.t.Context(), class, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		_ = f.admin.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return created
}

func (f *fixture) createClaim(name, class string, mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	f.t.Helper()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			},
		},
	}
	if mutate != nil {
		mutate(claim)
	}
	created, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Create(f.t.Context(), claim, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return created
}

func (f *fixture) deleteClaim(name string) {
	f.t.Helper()
	if err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Delete(f.t.Context(), name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// eventually polls cond until it holds; describe tells what was last seen
// when it never does.
func (f *fixture) eventually(what string, cond func(ctx context.Context) (bool, error)) {
	f.t.Helper()
	polltest.Until(f.t.Context(), f.t, what, 100*time.Millisecond, waitTimeout, cond)
}

// waitBound waits until the claim is Bound and returns it.
func (f *fixture) waitBound(name string) *corev1.PersistentVolumeClaim {
	f.t.Helper()
	var claim *corev1.PersistentVolumeClaim
	f.eventually(fmt.Sprintf("claim %s to be Bound", name), func(ctx context.Context) (bool, error) {
		var err error
		claim, err = f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return claim.Status.Phase == corev1.ClaimBound, nil
	})
	return claim
}

// waitClaimGone waits until the claim object no longer exists.
func (f *fixture) waitClaimGone(name string) {
	f.t.Helper()
	f.eventually(fmt.Sprintf("claim %s to be gone", name), func(ctx context.Context) (bool, error) {
		_, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// waitVolumeGone waits until the PersistentVolume no longer exists.
func (f *fixture) waitVolumeGone(name string) {
	f.t.Helper()
	f.eventually(fmt.Sprintf("PersistentVolume %s to be gone", name), func(ctx context.Context) (bool, error) {
		_, err := f.admin.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func (f *fixture) volume(name string) *corev1.PersistentVolume {
	f.t.Helper()
	volume, err := f.admin.CoreV1().PersistentVolumes().Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return volume
}

// events returns the Events about a claim with the given reason.
func (f *fixture) events(claim *corev1.PersistentVolumeClaim, reason string) []corev1.Event {
	f.t.Helper()
	selector := fields.Set{
		"involvedObject.kind": "PersistentVolumeClaim",
		"involvedObject.name": claim.Name,
		"involvedObject.uid":  string(claim.UID),
		"reason":              reason,
	}.AsSelector().String()
	list, err := f.admin.CoreV1().Events(f.namespace).List(f.t.Context(), metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		f.t.Fatal(err)
	}
	return list.Items
}

// ours keeps the Events posted by the controllers under test, not those of
// kube-controller-manager.
func ours(events []corev1.Event) []corev1.Event {
	var out []corev1.Event
	for _, e := range events {
		if e.Source.Component == eventComponent {
			out = append(out, e)
		}
	}
	return out
}

// volumeName is the deterministic PersistentVolume name of a claim.
func volumeName(claim *corev1.PersistentVolumeClaim) string {
	return "pvc-" + string(claim.UID)
}
